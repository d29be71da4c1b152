/*
 * The ACL rule of docs/security.md as the tests apply it: the single-server commands, the
 * per-tenant scope, and the CLI verbs a tenant with the rule must be able to run.
 */
#ifndef BATON_TEST_ACL_HELPER_H
#define BATON_TEST_ACL_HELPER_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

/* docs/security.md, "Single server" */
#define ACL_RULE_COMMANDS                                                                          \
    "-@all +ping +info +evalsha +eval +subscribe +unsubscribe +exists +hexists +hget +get "        \
    "+pttl +del +type +time +incr +incrby +decr +decrby +set +hset +hincrby +hdel +hlen +hkeys "   \
    "+pexpire +lindex +lpop +rpush +lrem +lrange +zadd +zrem +zscore +zmscore +zcard +zrank "      \
    "+zpopmin +zrange +zrangebyscore +zremrangebyscore +hgetall +publish +pubsub|numsub +scan "    \
    "+client|setname +hmget +hvals +xadd +xlen +xrange +xrevrange"
/* docs/security.md, "Per-tenant scoping", for names P... */
#define ACL_RULE_SCOPE "resetkeys resetchannels ~P* ~*{P*}* &*{P*}*"
/* docs/security.md, "Sentinel" (data nodes), "Cluster" and "sync_replicas" */
#define ACL_RULE_SENTINEL "+role"
#define ACL_RULE_CLUSTER                                                                           \
    "+cluster|shards +cluster|slots +asking +spublish +ssubscribe +sunsubscribe "                  \
    "+pubsub|shardnumsub"
#define ACL_RULE_SYNC "+wait"

/* ACL SETUSER user reset on >pw <scope> <commands> <extra> on the node at port. */
void acl_setuser(int port, const char *user, const char *extra);
/* Runs every CLI verb as a tenant at url on name (which starts with P): each exits as a
 * tenant with the rule expects (0, or 1 for unlock --force of nothing), with no warning;
 * `what` names the deployment in the messages. */
void acl_run_cli_verbs(const char *url, const char *name, const char *what);

/* Waits for the child pid: its exit status, or 128 + the signal that ended it. */
int acl_wait_exit(pid_t pid);

#endif
