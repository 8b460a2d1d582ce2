//! edgelimit on a real Redis Cluster: 3 masters and 3 replicas started by the test on free loopback ports.

use edgelimit_cli::redis_cluster::{command, RedisCluster, Role};

#[tokio::test]
async fn the_harness_forms_a_six_node_cluster_that_serves_every_slot() {
    let cluster = RedisCluster::start(3, 1).await.expect("start a 6-node cluster");
    let roles = cluster.roles().await;
    let count = |role| roles.iter().filter(|(_, r)| *r == role).count();
    assert_eq!((count(Role::Master), count(Role::Replica)), (3, 3), "{roles:?}");
    let info = command(cluster.ports()[0], &["CLUSTER", "INFO"]).await.unwrap();
    let redis::Value::BulkString(info) = info else {
        panic!("CLUSTER INFO: {info:?}")
    };
    assert!(String::from_utf8_lossy(&info).contains("cluster_slots_ok:16384"));
}
