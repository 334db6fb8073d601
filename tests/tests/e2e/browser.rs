//! A headless Chromium (Debian's `chromium`, which `scripts/test`
//! installs), driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: JSON messages ended by a NUL byte on file
//! descriptors 3 and 4), so the console's tests look at the page a browser
//! draws, its script run, without a driver to install.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one protocol call may take.
const CALL_PATIENCE: Duration = Duration::from_secs(30);

/// A running headless browser with one page open; it ends when dropped.
pub(crate) struct Browser {
    child: Child,
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

/// A pipe: its read end and its write end.
fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe(2) to fill.
    let made = unsafe { libc::pipe(fds.as_mut_ptr()) };
    assert_eq!(made, 0, "a pipe: {}", std::io::Error::last_os_error());
    (fds[0], fds[1])
}

impl Browser {
    /// Starts Chromium headless, with a fresh profile.
    ///
    /// # Panics
    /// When `chromium` is not installed (`scripts/test` installs it).
    pub(crate) fn start() -> Browser {
        let found = Command::new("chromium").arg("--version").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "the console's browser tests need Debian's chromium: apt-get install chromium (scripts/test does)"
        );
        let profile = tempfile::tempdir().unwrap();
        let (browser_reads, we_write) = pipe();
        let (we_read, browser_writes) = pipe();
        let mut command = Command::new("chromium");
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                "--window-size=1200,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec;
        // dup2 leaves the new descriptors open across exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(browser_reads, 3) < 0 || libc::dup2(browser_writes, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        // SAFETY: each descriptor is a pipe end this process owns and hands
        // to exactly one owner here (the child has its own copies).
        let (to_browser, from_browser) = unsafe {
            libc::close(browser_reads);
            libc::close(browser_writes);
            (File::from_raw_fd(we_write), File::from_raw_fd(we_read))
        };
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser);
            let mut message = Vec::new();
            while reader
                .read_until(0, &mut message)
                .is_ok_and(|read| read > 0)
            {
                message.pop();
                if let Ok(value) = serde_json::from_slice::<Value>(&message)
                    && sender.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        Browser {
            child,
            to_browser,
            from_browser: messages,
            next_id: 0,
            session: None,
            _profile: profile,
        }
    }

    /// Calls `method` (on the open page, once there is one) and returns
    /// its result.
    ///
    /// # Panics
    /// On an error answer, or none within [`CALL_PATIENCE`].
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .expect("the browser reads");
        let deadline = Instant::now() + CALL_PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self
                .from_browser
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {method} within {CALL_PATIENCE:?}"));
            if answer["id"] == json!(id) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// Opens `url` in a new page and waits until it has loaded.
    pub(crate) fn open(&mut self, url: &str) {
        self.session = None;
        let target = self.call("Target.createTarget", json!({"url": url}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        // A new page is `about:blank`, already complete, until the
        // navigation commits: wait for this URL's document.
        let loaded = format!(
            "location.href === {} && document.readyState === 'complete'",
            json!(url)
        );
        self.wait_for(&format!("{url} loaded"), &loaded);
    }

    /// The value of `expression` in the open page.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the open page; returns how long
    /// that took.
    ///
    /// # Panics
    /// After [`beehive_e2e::PATIENCE`], naming `what`.
    pub(crate) fn wait_for(&mut self, what: &str, expression: &str) -> Duration {
        let started = Instant::now();
        while self.eval(expression) != json!(true) {
            assert!(
                started.elapsed() < beehive_e2e::PATIENCE,
                "timed out waiting until {what} ({expression})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        started.elapsed()
    }

    /// Saves what the open page looks like as a PNG at `to`.
    pub(crate) fn screenshot(&mut self, to: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = decode_base64(shot["data"].as_str().expect("image data"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(to, png).expect("the screenshot is saved");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64, as the protocol sends images.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|c| *c != b'=').map(value).collect();
    digits
        .chunks(4)
        .flat_map(|chunk| {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            bytes.into_iter().take(chunk.len().saturating_sub(1))
        })
        .collect()
}
