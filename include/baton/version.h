/*
 * baton version: the single place the version is written. CMake reads the three numbers
 * below; programs read them at compile time here and at run time with baton_version().
 */
#ifndef BATON_VERSION_H
#define BATON_VERSION_H

#define BATON_VERSION_MAJOR 0
#define BATON_VERSION_MINOR 3
#define BATON_VERSION_PATCH 0

#define BATON_VERSION_STRINGIFY_(x) #x
#define BATON_VERSION_STRINGIFY(x) BATON_VERSION_STRINGIFY_(x)
#define BATON_VERSION_STRING                                                                       \
    BATON_VERSION_STRINGIFY(BATON_VERSION_MAJOR)                                                   \
    "." BATON_VERSION_STRINGIFY(BATON_VERSION_MINOR) "." BATON_VERSION_STRINGIFY(                  \
        BATON_VERSION_PATCH)

/* One number for comparisons: 0xMMmmpp. */
#define BATON_VERSION_HEX                                                                          \
    ((BATON_VERSION_MAJOR << 16) | (BATON_VERSION_MINOR << 8) | BATON_VERSION_PATCH)

#endif /* BATON_VERSION_H */
