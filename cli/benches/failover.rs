//! What a client of a PostgreSQL store waits through when its host or the
//! database fails, through the real binary: two hosts serve the greeting
//! plugin (`scripts/build-plugins`), a client applies small batches
//! without pause, and a fault a round strikes the active host or the
//! server. Each round's figure is the longest any one `apply` took,
//! retries included; no `apply` may fail.
//!
//! Prints:
//! - `pg.client_gap_pause_s`, `pg.client_gap_cut_s`,
//!   `pg.client_gap_restart_s`, `pg.client_gap_kill_s`: the worst round of
//!   each fault (the active host paused with SIGSTOP; its network to the
//!   server cut; the server restarted; the active host killed);
//! - `pg.client_gap_max_s`: the worst of them all.

use std::time::Duration;

use beehive_e2e::bench::{self, figure};
use beehive_e2e::{
    ApplyLoad, HostProcess, PostgresProxy, TestPostgres, Workspace, active_host_pid, wait_until,
};

/// Rounds of each fault.
const ROUNDS: usize = 2;

/// How long the load runs before and after a fault, so each round has
/// applies in flight when it strikes and measures the recovery whole.
const SETTLE: Duration = Duration::from_secs(2);
const RECOVER: Duration = Duration::from_secs(8);

const FAULTS: [&str; 4] = ["pause", "cut", "restart", "kill"];

/// Whether to run: `cargo bench -- NAME` runs it when NAME is part of a
/// figure's name.
fn wanted() -> bool {
    bench::wanted("pg.client_gap_max_s")
        || FAULTS
            .iter()
            .any(|fault| bench::wanted(&format!("pg.client_gap_{fault}_s")))
}

/// The hosts, one of them active, and what strikes them.
struct Cluster<'a> {
    server: &'a TestPostgres,
    proxy: &'a PostgresProxy,
    workspace: &'a Workspace,
    hosts: Vec<HostProcess>,
    started: usize,
}

impl Cluster<'_> {
    fn standby(&mut self) {
        self.started += 1;
        let log = format!("host-{}.log", self.started);
        let host = self.workspace.start_host_until(&[], &log, "standing by");
        self.hosts.push(host);
    }

    /// Strikes with `fault`, and undoes it once the load has recovered.
    fn round(&mut self, fault: &str) -> Duration {
        let load = ApplyLoad::start(self.workspace, self.proxy.url());
        std::thread::sleep(SETTLE);
        let active = active_host_pid(self.workspace);
        let at = self.hosts.iter().position(|h| h.pid() == active).unwrap();
        let stood_by = self.hosts[at].stand_bys();
        match fault {
            "pause" => self.hosts[at].signal("STOP"),
            "cut" => self.proxy.cut(active),
            "restart" => self.server.restart(),
            _ => self.hosts.remove(at).kill(),
        }
        std::thread::sleep(RECOVER);
        let told = load.stop();
        assert!(
            told.failed.is_empty(),
            "after the {fault}, applies failed: {:?}",
            told.failed
        );
        match fault {
            "pause" => self.hosts[at].signal("CONT"),
            "cut" => self.proxy.mend(active),
            "kill" => self.standby(),
            _ => {}
        }
        if matches!(fault, "pause" | "cut") {
            wait_until("the struck host stands by again", || {
                self.hosts[at].stand_bys() > stood_by
            });
        }
        told.longest
    }
}

fn main() {
    if !wanted() {
        return;
    }
    let server = TestPostgres::start();
    let proxy = PostgresProxy::start(&server);
    let workspace = Workspace::with_db(proxy.url());
    workspace.push_plugin("greeting");
    let mut cluster = Cluster {
        server: &server,
        proxy: &proxy,
        workspace: &workspace,
        hosts: vec![workspace.start_host_until(&[], "host-0.log", beehive_e2e::PLUGINS_LOADED)],
        started: 0,
    };
    cluster.standby();
    let mut worst = Duration::ZERO;
    for fault in FAULTS {
        let longest = (0..ROUNDS)
            .map(|_| cluster.round(fault))
            .max()
            .unwrap_or_default();
        figure(
            &format!("pg.client_gap_{fault}_s"),
            longest.as_secs_f64(),
            "s",
        );
        worst = worst.max(longest);
    }
    figure("pg.client_gap_max_s", worst.as_secs_f64(), "s");
    for host in cluster.hosts {
        host.kill();
    }
}
