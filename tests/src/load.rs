//! A steady client load for chaos tests and benchmarks: `beehive apply`
//! of small batches, each timed, until stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Workspace, wait_until};

/// A client applying small batches of new greetings until stopped; what
/// it was told comes back from [`ApplyLoad::stop`]. Each `apply` may take
/// up to 30 s (`--request-timeout`), so a client riding out a fault is
/// measured, not cut short.
pub struct ApplyLoad {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Told>,
}

/// What the load's client was told.
#[derive(Default)]
pub struct Told {
    pub acknowledged: Vec<String>,
    /// Each failed `apply`'s message.
    pub failed: Vec<String>,
    /// The longest any `apply` took.
    pub longest: Duration,
}

impl ApplyLoad {
    /// Starts applying into `workspace`'s store at `db`.
    pub fn start(workspace: &Workspace, db: &str) -> ApplyLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, db, stopped) = (workspace.path().to_path_buf(), db.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut told = Told::default();
            let mut batch = 0;
            while !stopped.load(Ordering::SeqCst) {
                let names: Vec<String> = (0..5).map(|i| format!("load-{batch}-{i}")).collect();
                let manifest: String = names
                    .iter()
                    .map(|n| format!("{{\"kind\":\"Greeting.example.dev\",\"name\":\"{n}\",\"spec\":{{\"name\":\"{n}\"}}}}\n"))
                    .collect();
                let file = dir.join(format!("load-{batch}.json"));
                std::fs::write(&file, manifest).unwrap();
                let started = Instant::now();
                let done = crate::command_on(&dir, &db)
                    .args(["--request-timeout", "30s", "apply", "-f"])
                    .arg(&file)
                    .output()
                    .unwrap();
                told.longest = told.longest.max(started.elapsed());
                match done.status.success() {
                    true => told.acknowledged.extend(names),
                    false => told
                        .failed
                        .push(String::from_utf8_lossy(&done.stderr).into_owned()),
                }
                batch += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            told
        });
        ApplyLoad { stop, thread }
    }

    /// Stops, and says what the client was told.
    ///
    /// # Panics
    /// When the client's thread panicked.
    pub fn stop(self) -> Told {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// The process id of the host holding the lease, once one does.
///
/// # Panics
/// When no host takes it within the tests' patience.
pub fn active_host_pid(workspace: &Workspace) -> u32 {
    let mut pid = None;
    wait_until("a host holds the lease", || {
        let listed = workspace.run(&["--request-timeout", "5s", "plugins"]);
        pid = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .find_map(|line| line.strip_prefix("Active host: "))
            .and_then(|rest| rest.split(" (").next()?.rsplit(':').next()?.parse().ok());
        pid.is_some()
    });
    pid.unwrap()
}
