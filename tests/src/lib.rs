//! What the test suites in `tests/tests/` share: the library's integration
//! tests (`integration/`, in-process, on SQLite or PostgreSQL) and the
//! end-to-end tests (`e2e/`: each test gets its own directory and runs the
//! real `beehive` binary in it); and in [`bench`](mod@bench) what the
//! benchmarks in `tests/benches/` share.

pub mod bench;
mod cut;
mod http_server;
mod library;
mod load;
pub mod otlp;
mod postgres;
mod registry;

pub use cut::PostgresProxy;
pub use http_server::TestServer;
pub use library::{
    PassCounter, create_finalized, delete_and_wait_gone, metric, rise_over_three_sweeps,
    run_after_restart, run_then_crash, scalar, serve, serve_with, spec, store, update,
};
pub use load::{ApplyLoad, Told, active_host_pid};
pub use postgres::TestPostgres;
pub use registry::TestRegistry;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a bounded wait in a test waits before failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How long a started host may take to load its plugins: an uncached
/// Python plugin compiles for half a minute on an idle 2-core machine, and
/// for several times that on a loaded one.
pub const LOAD_PATIENCE: Duration = Duration::from_secs(600);

/// What a host logs once its first load of the plugin directory is done
/// (each plugin serving or refused).
pub const PLUGINS_LOADED: &str = "first plugin load done";

/// Stops a host started in-process, which must finish its passes within
/// [`PATIENCE`] and report no error.
///
/// # Panics
/// When it does not.
pub async fn stop(running: beehive::engine::StopHandle) {
    running
        .stop(PATIENCE)
        .await
        .expect("the host stops cleanly");
}

/// Polls `condition` every 20 ms until it holds.
///
/// # Panics
/// When it does not hold within [`PATIENCE`].
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `condition` every 10 ms, without blocking the async runtime, until
/// it holds.
///
/// # Panics
/// When it does not hold within [`PATIENCE`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts that `text` (a command's output, a log) mentions every one of
/// `phrases`, and shows the whole text when it does not.
#[track_caller]
pub fn assert_mentions(text: &str, phrases: &[&str]) {
    let missing: Vec<&str> = phrases
        .iter()
        .copied()
        .filter(|phrase| !text.contains(phrase))
        .collect();
    assert!(missing.is_empty(), "{missing:?} not mentioned in:\n{text}");
}

/// Creates the object `name` with the JSON `spec` through `client`.
///
/// # Panics
/// When `spec` is not JSON or the create fails.
pub async fn create(client: &beehive::RawClient, name: &str, spec: &str) -> beehive::RawObject {
    let spec = beehive::Json::parse(spec).expect("a JSON spec");
    client
        .create(name, spec, beehive::CreateOptions::new())
        .await
        .unwrap_or_else(|error| panic!("create {name}: {error}"))
}

/// Why each plugin file in `directory` failed to load.
pub fn load_failures(directory: &beehive::plugin::Directory) -> Vec<String> {
    let failures = directory.failures();
    failures.iter().map(|f| f.error.to_string()).collect()
}

/// A fresh directory holding the named example plugins, each as `NAME.wasm`.
///
/// # Panics
/// When a plugin has not been built.
pub fn plugin_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for name in names {
        install_example_policy(name, &dir.path().join(format!("{name}.toml")));
        std::fs::copy(plugin_wasm(name), dir.path().join(format!("{name}.wasm")))
            .expect("copy plugin");
    }
    dir
}

/// The policy an example plugin ships with, if it needs one
/// (`plugins/NAME/policy.toml`: what it needs granted, such as `cascade`'s
/// write on `Greeting`s).
pub fn example_policy(plugin: &str) -> Option<PathBuf> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins")
        .join(plugin)
        .join("policy.toml");
    shipped.exists().then_some(shipped)
}

/// Copies example plugin `plugin`'s policy to `to`, unless a policy is
/// there already.
fn install_example_policy(plugin: &str, to: &Path) {
    if let Some(shipped) = example_policy(plugin)
        && !to.exists()
    {
        std::fs::copy(&shipped, to).expect("copy the example's policy");
    }
}

/// The directory of this build's profile (`target/<profile>`), where the
/// running test or benchmark executable sits in `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    exe.ancestors()
        .nth(2)
        .expect("the test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// The build's target directory, above [`profile_dir`].
fn target_dir() -> PathBuf {
    let profile = profile_dir();
    profile
        .parent()
        .expect("a profile sits in a target directory")
        .to_path_buf()
}

/// `path`, which a build step makes.
///
/// # Panics
/// When it is missing; the message names the step.
fn built(path: PathBuf, step: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run {step} (scripts/test does)",
        path.display()
    );
    path
}

/// A compiled-plugin cache shared by every test run of this build
/// (`target/test-plugin-cache`, private to the user): big plugins (Python's
/// are 18 MB) compile once, not once per test. Artifacts are sealed to the
/// plugin's hash, so sharing is safe.
///
/// # Panics
/// When the directory cannot be made.
pub fn shared_plugin_cache() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;

    let dir = target_dir().join("test-plugin-cache");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("the shared plugin cache");
    dir
}

/// The `beehive` binary of this build, next to the test executable's `deps/`.
///
/// # Panics
/// When the binary has not been built.
pub fn beehive_bin() -> PathBuf {
    let bin = format!("beehive{}", std::env::consts::EXE_SUFFIX);
    built(
        profile_dir().join(bin),
        "`cargo build --workspace --bins --tests`",
    )
}

/// The example plugin `name`, built as a component by `scripts/build-plugins`.
///
/// # Panics
/// When it has not been built.
pub fn plugin_wasm(name: &str) -> PathBuf {
    let wasm = format!("wasm32-wasip2/release/{name}.wasm");
    built(target_dir().join(wasm), "scripts/build-plugins")
}

/// The contract-0.1 build of example plugin `name`, checked into
/// `tests/fixtures/contract-0.1/`: a plugin as built before contract 0.2.
pub fn contract_0_1_wasm(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/contract-0.1")
        .join(format!("{name}.wasm"))
}

/// `beehive`, run in `dir` on the store at `db`, as a [`Workspace`] made
/// [`with_db`](Workspace::with_db) runs it; for threads that cannot borrow
/// the workspace.
pub fn command_on(dir: &Path, db: &str) -> Command {
    let mut command = Command::new(beehive_bin());
    command.current_dir(dir).env("BEEHIVE_DB", db);
    // A PostgreSQL store's lock, socket and plugin cache live in the
    // temporary directory; keep them in the workspace, so they go with it
    // instead of piling up in /tmp run after run.
    command.env("TMPDIR", dir);
    command
}

/// A scratch directory and a way to run `beehive` inside it.
pub struct Workspace {
    dir: tempfile::TempDir,
    /// The store every command names (`BEEHIVE_DB`), when not the default
    /// `beehive.db` in the directory.
    db: Option<String>,
}

impl Workspace {
    /// A fresh, empty directory.
    pub fn new() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("a temporary directory"),
            db: None,
        }
    }

    /// A fresh directory whose `plugins/` holds the named example plugins,
    /// each as `NAME.wasm`.
    pub fn with_plugins(names: &[&str]) -> Self {
        let workspace = Workspace::new();
        for name in names {
            workspace.install_plugin(name, &format!("{name}.wasm"));
        }
        workspace
    }

    /// A fresh, empty directory whose commands all use the store at `db`
    /// (a PostgreSQL connection string, say).
    pub fn with_db(db: &str) -> Self {
        Workspace {
            db: Some(db.to_string()),
            ..Workspace::new()
        }
    }

    fn command(&self) -> Command {
        match &self.db {
            Some(db) => command_on(self.path(), db),
            None => {
                let mut command = Command::new(beehive_bin());
                command.current_dir(self.path());
                command
            }
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `beehive ARGS` in the directory and waits for it.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("beehive runs")
    }

    /// Runs `beehive ARGS` in the directory with `env` set, and waits for it.
    pub fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self.command();
        command.args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().expect("beehive runs")
    }

    /// Starts `beehive ARGS` (a watch: `get -w`, `events -w`) in the
    /// background, its output read line by line; stopped when dropped.
    pub fn follow(&self, args: &[&str]) -> Following {
        let mut child = self
            .command()
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("beehive runs");
        let stdout = child.stdout.take().expect("stdout is piped");
        Following {
            child,
            lines: std::io::BufRead::lines(std::io::BufReader::new(stdout)),
        }
    }

    /// Runs `beehive ARGS`, which must succeed, and returns its stdout.
    ///
    /// # Panics
    /// When it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "beehive {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs `beehive ARGS`, which must fail with one line on stderr, and
    /// returns that line.
    ///
    /// # Panics
    /// When it succeeds or says more than one line.
    pub fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "beehive {args:?} succeeded");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "one error line from {args:?}: {stderr}");
        errors[0].to_string()
    }

    /// Writes `text` to `file` and applies it, expecting success; returns
    /// what `apply` printed.
    pub fn apply(&self, file: &str, text: &str) -> String {
        self.write(file, text);
        self.ok(&["apply", "-f", file])
    }

    /// As [`Workspace::apply`], allowed to create kinds that nothing knows
    /// yet (`--new-kind`): plain records no plugin serves.
    pub fn apply_new_kind(&self, file: &str, text: &str) -> String {
        self.write(file, text);
        self.ok(&["apply", "-f", file, "--new-kind"])
    }

    /// Writes `text` to `file` and applies it, expecting the apply to fail;
    /// returns its one error line.
    pub fn apply_fails(&self, file: &str, text: &str) -> String {
        self.write(file, text);
        self.fails(&["apply", "-f", file])
    }

    /// Writes `text` to `name` in the directory.
    pub fn write(&self, name: &str, text: &str) {
        let path = self.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("parent directory");
        }
        std::fs::write(path, text).expect("write file");
    }

    /// Copies example plugin `plugin` into `plugins/FILE` by writing a
    /// hidden file and renaming it into place, as an operator should.
    pub fn install_plugin(&self, plugin: &str, file: &str) {
        self.install_build(plugin, &plugin_wasm(plugin), file);
    }

    /// Installs example plugin `plugin`'s contract-0.1 build (checked in
    /// under `tests/fixtures/contract-0.1/`) as `plugins/FILE`, as
    /// [`Workspace::install_plugin`] does.
    pub fn install_plugin_0_1(&self, plugin: &str, file: &str) {
        self.install_build(plugin, &contract_0_1_wasm(plugin), file);
    }

    /// Installs `build`, a build of example plugin `plugin`, as
    /// `plugins/FILE` with the example's policy beside it, written first
    /// and renamed into place, as a deployment would.
    fn install_build(&self, plugin: &str, build: &Path, file: &str) {
        let dir = self.path().join("plugins");
        std::fs::create_dir_all(&dir).expect("plugins directory");
        let stem = file.strip_suffix(".wasm").unwrap_or(file);
        install_example_policy(plugin, &dir.join(format!("{stem}.toml")));
        let staging = dir.join(format!(".{file}.tmp"));
        std::fs::copy(build, &staging).expect("copy plugin");
        std::fs::rename(&staging, dir.join(file)).expect("rename plugin");
    }

    /// Installs example plugin `plugin` as `plugins/PLUGIN.wasm` with `policy`
    /// as its grants file, `plugins/PLUGIN.toml`, written first so a running
    /// host never sees the plugin without its grants.
    pub fn install_granted(&self, plugin: &str, policy: &str) {
        self.write(&format!("plugins/{plugin}.toml"), policy);
        self.install_plugin(plugin, &format!("{plugin}.wasm"));
    }

    /// Starts `beehive run ARGS` in the background and waits until it
    /// serves (its socket answers; on a PostgreSQL store, until it is the
    /// active host) and its first load of the plugin directory is done.
    ///
    /// # Panics
    /// When it exits, does not serve within [`PATIENCE`], or does not load
    /// its plugins within [`LOAD_PATIENCE`].
    pub fn start_host(&self, args: &[&str]) -> HostProcess {
        self.start_host_with_env(args, &[])
    }

    /// [`Workspace::start_host`] with `env` set for the host.
    ///
    /// # Panics
    /// As [`Workspace::start_host`].
    pub fn start_host_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> HostProcess {
        let host = if self.db.is_some() {
            self.spawn_host(args, env, "host.log", "serving ", |log| {
                log.contains("serving ")
            })
        } else {
            let socket = self.path().join("beehive.db.sock");
            self.spawn_host(args, env, "host.log", "the host serves", |_| {
                std::os::unix::net::UnixStream::connect(&socket).is_ok()
            })
        };
        let mut host = host;
        host.wait_until_loaded();
        host
    }

    /// Pushes example plugin `plugin` into this workspace's PostgreSQL
    /// store, under its own name.
    ///
    /// # Panics
    /// When the push fails.
    pub fn push_plugin(&self, plugin: &str) {
        let wasm = plugin_wasm(plugin);
        self.ok(&["plugins", "push", wasm.to_str().unwrap(), "--name", plugin]);
    }

    /// Starts `beehive run ARGS` in the background, logging to `log`, and
    /// waits until its log says `line`.
    ///
    /// # Panics
    /// When it exits or does not log `line` within [`PATIENCE`].
    pub fn start_host_until(&self, args: &[&str], log: &str, line: &str) -> HostProcess {
        self.spawn_host(args, &[], log, line, |log| log.contains(line))
    }

    /// Starts `beehive run ARGS`, logging to `log`, and waits until `ready`
    /// holds of what it logged so far.
    fn spawn_host(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        log: &str,
        what: &str,
        mut ready: impl FnMut(&str) -> bool,
    ) -> HostProcess {
        let path = self.path().join(log);
        let file = std::fs::File::create(&path).expect("log file");
        let child = self
            .command()
            .arg("run")
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("beehive run starts");
        let mut host = HostProcess { child, log: path };
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = host.child.try_wait() {
                panic!("the host exited ({status}): {}", host.log());
            }
            let logged = host.log();
            if ready(&logged) {
                return host;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what}; the host logged:\n{logged}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A command that streams, from [`Workspace::follow`]; killed when dropped.
pub struct Following {
    child: Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Following {
    /// The next line it prints, waiting for it.
    ///
    /// # Panics
    /// When the command ends first.
    pub fn next_line(&mut self) -> String {
        let line = self.lines.next().expect("the command goes on printing");
        line.expect("its output is text")
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `beehive run` in the background.
pub struct HostProcess {
    child: Child,
    log: PathBuf,
}

impl HostProcess {
    /// Waits until it has logged [`PLUGINS_LOADED`] (a host that stands by
    /// logs it only once it serves).
    ///
    /// # Panics
    /// When it exits first, or takes longer than [`LOAD_PATIENCE`].
    pub fn wait_until_loaded(&mut self) {
        let deadline = Instant::now() + LOAD_PATIENCE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the host exited ({status}): {}", self.log());
            }
            let logged = self.log();
            if logged.contains(PLUGINS_LOADED) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the host did not load its plugins within {LOAD_PATIENCE:?}:\n{logged}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many times it went back to standing by, on a PostgreSQL store.
    pub fn stand_bys(&self) -> usize {
        self.log().matches("back to standing by").count()
    }

    /// Sends SIGTERM and waits for a graceful exit.
    ///
    /// # Panics
    /// When it does not exit successfully.
    pub fn terminate(mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let status = self.child.wait().expect("the host exits");
        assert!(status.success(), "the host failed to stop: {}", self.log());
    }

    /// Sends `signal` (`TERM`, `INT`, ...) without waiting.
    ///
    /// # Panics
    /// When `kill` cannot be run.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// Waits up to `patience` for the host to exit, and says how it did.
    ///
    /// # Panics
    /// When it is still running then; the message holds its log.
    pub fn exits_within(&mut self, patience: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(status) = self.child.try_wait().expect("the host can be waited on") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the host still runs after {patience:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: the host dies where it stands.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("the host is reaped");
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        // A test that failed halfway must not leave a host behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// One HTTP/1.1 GET of `path` from `address` (`HOST:PORT`); the response's
/// head (status line and headers) and body.
///
/// # Panics
/// When the server cannot be reached or answers with no head.
pub fn http_get(address: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("the server is reached");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("the response is read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head");
    (head.to_string(), body.to_string())
}
