//! Chaos on PostgreSQL: two hosts, a steady client load, and one fault a
//! round (the active host killed, the active host paused past its lease,
//! the server restarted, the active host's connections terminated, the
//! active host's network cut). After every round the store is served again
//! within the bound; at the end every acknowledged create is kept, no
//! client's `apply` failed or waited past the bound, everything converges,
//! and no commit was made by a host that no longer held the lease.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
use beehive_e2e::{
    ApplyLoad, HostProcess, PostgresProxy, TestPostgres, Workspace, active_host_pid, wait_until,
};

/// How soon after a fault the store must be served again: the default
/// lease's failover bound (under 5 s, `beehive run --help`), doubled for a
/// test machine the rest of the suite may be loading. The benchmark's
/// `pg.failover_max_s` holds the bound itself.
const SERVED_AGAIN_WITHIN: Duration = Duration::from_secs(10);

/// How long one `apply` of the load may take, riding out any fault: the
/// bound a client is promised (5 s, `pg.client_gap_max_s`), doubled as
/// above.
const CLIENT_GAP_WITHIN: Duration = Duration::from_secs(10);

/// Records, at the commit of every write to `objects`, which process
/// committed and who held the lease then. It runs as a deferred constraint
/// trigger, at COMMIT, after the store's fence check has locked the lease
/// row: the holder it reads is the one the commit was judged against.
const AUDIT: &str = "
CREATE TABLE chaos_audit (app TEXT NOT NULL, holder TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO chaos_audit
    SELECT current_setting('application_name'), holder, extract(epoch FROM clock_timestamp())
    FROM host_lease WHERE id = 1;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER chaos_audit AFTER INSERT OR UPDATE ON objects
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION chaos_audit();
";

/// Creates probe greeting `name` through `client` (a store of the test's
/// own: no host's socket stands between, so a paused host's costs nothing
/// here) until a create succeeds, waits until a host has passed it, and
/// says how long that took from `since`.
fn served_again(client: &RawClient, name: &str, since: Instant) -> Duration {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = Json::parse(&format!("{{\"name\":\"{name}\"}}")).unwrap();
    wait_until(&format!("{name} is created"), || {
        let created = runtime.block_on(client.create(name, spec.clone(), CreateOptions::new()));
        // A create whose outcome was unknown may have committed.
        matches!(created, Ok(_) | Err(beehive::Error::NameTaken { .. }))
    });
    wait_until(&format!("{name} is passed"), || {
        client
            .get_by_name(name)
            .is_ok_and(|probe| probe.status.is_some() && probe.meta.is_observed())
    });
    since.elapsed()
}

/// Every greeting in the store, and how many of them are settled.
fn greetings(workspace: &Workspace) -> (Vec<String>, usize) {
    let all = workspace.ok(&["get", "Greeting", "-o", "json"]);
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    let all = all.as_array().unwrap();
    let settled = all
        .iter()
        .filter(|g| {
            g["status"]["message"].is_string() && g["observedGeneration"] == g["generation"]
        })
        .count();
    let names = all
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    (names, settled)
}

/// Now, in seconds since the epoch, as the audit dates commits.
fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn two_hosts_ride_out_a_fault_a_round_and_lose_nothing() {
    let server = TestPostgres::start();
    // Everything goes through the proxy, so one host's network can be cut.
    let proxy = PostgresProxy::start(&server);
    let workspace = Workspace::with_db(proxy.url());
    workspace.push_plugin("greeting");
    server.psql(AUDIT);
    let mut hosts: Vec<HostProcess> = vec![
        workspace.start_host_until(&[], "host-0.log", beehive_e2e::PLUGINS_LOADED),
        workspace.start_host_until(&[], "host-1.log", "standing by"),
    ];
    // Each host's pid, and when it was killed (seconds since the epoch).
    let mut lifetimes: HashMap<u32, f64> = hosts.iter().map(|h| (h.pid(), f64::MAX)).collect();
    let load = ApplyLoad::start(&workspace, proxy.url());
    let store = Store::open(server.url()).unwrap();
    let probes = RawClient::new(&store, GroupKind::new("example.dev", "Greeting"));
    served_again(&probes, "warm-up", Instant::now());

    let rounds = ["kill", "pause", "restart", "terminate", "cut"];
    for (round, fault) in rounds.into_iter().enumerate() {
        let active = active_host_pid(&workspace);
        let at = hosts.iter().position(|h| h.pid() == active).unwrap();
        let stood_by = hosts[at].stand_bys();
        let since = match fault {
            "kill" => {
                hosts.remove(at).kill();
                lifetimes.insert(active, now_epoch());
                Instant::now()
            }
            "pause" => {
                hosts[at].signal("STOP");
                Instant::now()
            }
            "restart" => {
                server.restart();
                Instant::now()
            }
            "terminate" => {
                server.terminate_connections_of(active);
                Instant::now()
            }
            _ => {
                proxy.cut(active);
                Instant::now()
            }
        };
        let took = served_again(&probes, &format!("probe-{round}"), since);
        eprintln!("after the {fault}: served again in {took:?}");
        assert!(
            took <= SERVED_AGAIN_WITHIN,
            "after the {fault}, the store was served again only after {took:?}"
        );
        match fault {
            "kill" => {
                let standby = format!("host-{}.log", hosts.len() + round + 1);
                hosts.push(workspace.start_host_until(&[], &standby, "standing by"));
                lifetimes.insert(hosts.last().unwrap().pid(), f64::MAX);
            }
            "pause" => {
                hosts[at].signal("CONT");
                wait_until("the resumed host stands by again", || {
                    hosts[at].stand_bys() > stood_by
                });
            }
            "cut" => {
                proxy.mend(active);
                wait_until("the reconnected host stands by again", || {
                    hosts[at].stand_bys() > stood_by
                });
            }
            _ => {}
        }
    }

    let told = load.stop();
    let acknowledged = told.acknowledged;
    assert!(!acknowledged.is_empty(), "the load applied something");
    assert!(
        told.failed.is_empty(),
        "every apply rides out the faults, but {} failed: {:?}",
        told.failed.len(),
        told.failed
    );
    eprintln!("the longest apply took {:?}", told.longest);
    assert!(
        told.longest <= CLIENT_GAP_WITHIN,
        "an apply took {:?}",
        told.longest
    );
    let (names, _) = greetings(&workspace);
    for name in &acknowledged {
        assert!(names.contains(name), "{name} was acknowledged and is lost");
    }
    wait_until("everything converges", || {
        let (names, settled) = greetings(&workspace);
        settled == names.len()
    });

    // No host committed while another held the lease.
    let audit = server.query("SELECT app, holder, at FROM chaos_audit");
    let mut audited = 0;
    for row in audit.lines() {
        let mut columns = row.split('|');
        let (app, holder) = (columns.next().unwrap(), columns.next().unwrap());
        let at: f64 = columns.next().unwrap().parse().unwrap();
        let committer = app.strip_prefix("beehive ").unwrap_or(app);
        let pid: Option<u32> = committer.rsplit(':').next().and_then(|p| p.parse().ok());
        // A killed host's pid may be reused by a later command (pids wrap
        // at 32768 here), whose direct writes are not a host's.
        let by_host = pid
            .and_then(|pid| lifetimes.get(&pid))
            .is_some_and(|&died| at < died);
        if by_host {
            audited += 1;
            assert_eq!(
                committer, holder,
                "a commit by a host not holding the lease"
            );
        }
    }
    assert!(audited > 0, "the hosts' commits were audited: {audit}");
    eprintln!(
        "{audited} commits by hosts audited, {} creates acknowledged",
        acknowledged.len()
    );
    for host in hosts {
        host.kill();
    }
}
