//! A throwaway PostgreSQL server for tests and benchmarks: `initdb` into a
//! temporary directory, started on a Unix socket there (no TCP port, unless
//! it also serves TLS), and stopped and removed when dropped. PostgreSQL
//! refuses to run as root; as root the server runs as `nobody`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running server, stopped when dropped.
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    as_nobody: bool,
    url: String,
    port: u16,
}

impl TestPostgres {
    /// Starts a fresh server. A server that is already running for this
    /// process's tests (`BEEHIVE_TEST_POSTGRES`) is not reused: each gets
    /// its own, so a test may stop or pause it.
    ///
    /// # Panics
    /// When PostgreSQL's server binaries are missing or it fails to start.
    pub fn start() -> TestPostgres {
        let server = TestPostgres::init(5432);
        server.run_server("-c listen_addresses=''");
        server
    }

    /// Starts a fresh server that also listens on 127.0.0.1 with TLS, its
    /// certificate issued for `localhost` (only) by a throwaway authority
    /// ([`TestPostgres::ca_file`]).
    ///
    /// # Panics
    /// As [`TestPostgres::start`]; when `openssl` is missing.
    pub fn start_with_tls() -> TestPostgres {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let server = TestPostgres::init(port);
        server.make_certificates();
        let dir = server.dir.path().display();
        server.run_server(&format!(
            "-c listen_addresses=127.0.0.1 -c ssl=on \
             -c ssl_cert_file={dir}/server.pem -c ssl_key_file={dir}/server.key"
        ));
        server
    }

    /// The certificate of the authority that issued a TLS server's.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A connection string over TCP to `host` (`localhost`, `127.0.0.1`)
    /// with `query` (`sslmode=…`) appended.
    pub fn tcp_url(&self, host: &str, query: &str) -> String {
        format!("postgres://beehive@{host}:{}/postgres?{query}", self.port)
    }

    fn init(port: u16) -> TestPostgres {
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
                "postgres://beehive@localhost/postgres?host={}&port={port}",
                dir.path().display()
            ),
            dir,
            bindir,
            as_nobody,
            port,
        };
        run(server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "beehive", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C"));
        server
    }

    fn run_server(&self, listen: &str) {
        let options = format!(
            "-k {} -p {} {listen} -c max_connections=200",
            self.dir.path().display(),
            self.port
        );
        run(self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-o", &options, "start"]));
    }

    /// A throwaway authority and a server certificate it signed for
    /// `localhost`, the key readable by the server's user alone.
    fn make_certificates(&self) {
        let dir = self.dir.path();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        run(Command::new("openssl")
            .current_dir(dir)
            .args(["req", "-x509"])
            .args(ec)
            .args(["-days", "2", "-subj", "/CN=beehive test authority"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .args(["-keyout", "ca.key", "-out", "ca.pem"]));
        run(Command::new("openssl")
            .current_dir(dir)
            .arg("req")
            .args(ec)
            .args([
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ]));
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("the extensions file");
        run(Command::new("openssl").current_dir(dir).args([
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ]));
        let key = dir.join("server.key");
        if self.as_nobody {
            run(Command::new("chown").arg("nobody").arg(&key));
        }
        run(Command::new("chmod").arg("600").arg(&key));
    }

    /// Restarts the server as an operator's routine restart does
    /// (`pg_ctl restart -m fast`: every connection is closed, the options
    /// kept), and returns once it accepts connections again.
    ///
    /// # Panics
    /// When the restart fails.
    pub fn restart(&self) {
        run(self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-m", "fast", "restart"]));
    }

    /// Runs `sql` on the server through `psql`, as its superuser would.
    ///
    /// # Panics
    /// When it fails.
    pub fn psql(&self, sql: &str) {
        self.query(sql);
    }

    /// Runs `sql` through `psql` and returns its rows, one a line, columns
    /// split by `|`.
    ///
    /// # Panics
    /// When it fails.
    pub fn query(&self, sql: &str) -> String {
        run(self
            .command("psql")
            .arg("-h")
            .arg(self.dir.path())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "beehive",
                "-d",
                "postgres",
            ])
            .args(["-v", "ON_ERROR_STOP=1", "-qAtc", sql]))
    }

    /// Terminates the connections of one process of the store's
    /// (`beehive HOST:PID` in `pg_stat_activity`), as an operator who
    /// picked them out would.
    ///
    /// # Panics
    /// When it fails.
    pub fn terminate_connections_of(&self, pid: u32) {
        self.psql(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name LIKE 'beehive %:{pid}'"
        ));
    }

    /// Terminates every other connection to the server
    /// (`pg_terminate_backend`), as an operator or a pooler's failover would.
    ///
    /// # Panics
    /// When it fails.
    pub fn terminate_connections(&self) {
        self.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
        );
    }

    /// The connection string of database `name` on this server.
    pub fn url_of(&self, name: &str) -> String {
        self.url.replacen("/postgres?", &format!("/{name}?"), 1)
    }

    /// Dumps database `name` (`pg_dump -Fc`), drops it with its
    /// connections, and restores the dump into a new database of the same
    /// name (`pg_restore`): a restore over the database the hosts used.
    ///
    /// # Panics
    /// When a step fails.
    pub fn dump_and_restore_over(&self, name: &str) {
        let dump = self.dir.path().join(format!("{name}.dump"));
        let socket = [
            "-h",
            self.dir.path().to_str().unwrap(),
            "-p",
            &self.port.to_string(),
        ];
        run(self.command("pg_dump").args(socket).args([
            "-U",
            "beehive",
            "-Fc",
            "-f",
            dump.to_str().unwrap(),
            name,
        ]));
        self.psql(&format!("DROP DATABASE {name} WITH (FORCE)"));
        self.psql(&format!("CREATE DATABASE {name}"));
        run(self.command("pg_restore").args(socket).args([
            "-U",
            "beehive",
            "-d",
            name,
            dump.to_str().unwrap(),
        ]));
    }

    /// Its connection string.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port it is known by (on its Unix socket too).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its Unix socket.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.path().join(format!(".s.PGSQL.{}", self.port))
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

fn run(command: &mut Command) -> String {
    let output = command.output().expect("a PostgreSQL tool runs");
    assert!(
        output.status.success(),
        "{:?} failed: {}",
        command,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
