//! Debian's `docker-registry` (the CNCF Distribution registry), started on
//! loopback for one test and stopped when it is dropped; `scripts/test`
//! installs it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A registry serving on `127.0.0.1:PORT`, its storage in a directory of
/// its own.
pub struct TestRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    dir: tempfile::TempDir,
}

impl TestRegistry {
    /// Starts one and waits (bounded) until it answers `/v2/`.
    ///
    /// # Panics
    /// When docker-registry is not installed, or does not answer within a
    /// minute.
    pub fn start() -> TestRegistry {
        let dir = tempfile::tempdir().expect("a directory for the registry");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: {address}\n",
                dir.path().join("data").display()
            ),
        )
        .expect("the registry's config");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry is not installed: scripts/test installs it (apt-get install docker-registry)");
        let registry = TestRegistry {
            child,
            address,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(&registry.address).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        registry
    }

    /// Where it keeps its blobs: a test playing a registry that serves
    /// other bytes rewrites one there.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn storage(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
