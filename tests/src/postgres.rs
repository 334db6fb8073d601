//! A throwaway PostgreSQL server for tests and benchmarks: `initdb` into a
//! temporary directory, started on a Unix socket there (no TCP port), and
//! stopped and removed when dropped. PostgreSQL refuses to run as root; as
//! root the server runs as `nobody`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running server, stopped when dropped.
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    as_nobody: bool,
    url: String,
}

impl TestPostgres {
    /// Starts a fresh server. A server that is already running for this
    /// process's tests (`BEEHIVE_TEST_POSTGRES`) is not reused: each gets
    /// its own, so a test may stop or pause it.
    ///
    /// # Panics
    /// When PostgreSQL's server binaries are missing or it fails to start.
    pub fn start() -> TestPostgres {
        let bindir = server_bindir();
        let dir = tempfile::Builder::new()
            .prefix("beehive-pg-")
            .tempdir()
            .expect("a temporary directory");
        // SAFETY: geteuid has no preconditions and cannot fail.
        let as_nobody = unsafe { libc::geteuid() } == 0;
        if as_nobody {
            run(Command::new("chown").arg("nobody").arg(dir.path()));
        }
        let data = dir.path().join("data");
        let server = TestPostgres {
            url: format!(
                "postgres://beehive@localhost/postgres?host={}&port=5432",
                dir.path().display()
            ),
            dir,
            bindir,
            as_nobody,
        };
        run(server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "beehive", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C"));
        let options = format!(
            "-k {} -p 5432 -c listen_addresses='' -c max_connections=200",
            server.dir.path().display()
        );
        run(server
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(server.dir.path().join("log"))
            .args(["-w", "-o", &options, "start"]));
        server
    }

    /// Its connection string.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn command(&self, program: &str) -> Command {
        let binary = self.bindir.join(program);
        if self.as_nobody {
            let mut command = Command::new("runuser");
            command.args(["-u", "nobody", "--"]).arg(binary);
            command
        } else {
            Command::new(binary)
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Where the newest installed PostgreSQL keeps its server binaries (not on
/// PATH on Debian), or `PG_BINDIR`.
fn server_bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BINDIR") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    versions.sort_by_key(|path| {
        path.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
    });
    let bindir = versions
        .pop()
        .map(|version| version.join("bin"))
        .expect("PostgreSQL server binaries under /usr/lib/postgresql (or set PG_BINDIR)");
    assert!(
        Path::new(&bindir).join("initdb").exists(),
        "no initdb in {}",
        bindir.display()
    );
    bindir
}

fn run(command: &mut Command) {
    let output = command.output().expect("a PostgreSQL tool runs");
    assert!(
        output.status.success(),
        "{:?} failed: {}",
        command,
        String::from_utf8_lossy(&output.stderr)
    );
}
