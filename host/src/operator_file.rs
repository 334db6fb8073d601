//! Reading a file the operator named (a plugin, its policy, a config value's
//! source) so that the file cannot hang or exhaust the host.
//!
//! The adversary is whatever sits at the path: a FIFO nobody writes (a
//! plain `open` blocks until a writer comes), `/dev/zero` (a plain read never
//! ends), a directory, a socket, or a regular file far larger than anything
//! meant to be there. The file is opened without blocking, refused unless it
//! is a regular file, and read to at most a stated limit. Symlinks are
//! followed: an operator may link a policy from elsewhere, and what matters
//! is what the link reaches.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most bytes of a plugin's `.wasm` file the host reads (256 MiB).
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// The most bytes of a policy file (`NAME.toml`) the host reads (1 MiB).
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// The bytes of `path`, a regular file of at most `limit` bytes.
///
/// # Errors
/// The open's own error (so `NotFound` stays `NotFound`), or an
/// `InvalidInput` error saying what the path is instead of a regular file
/// or that it is over `limit`.
pub(crate) fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Opening a FIFO for reading blocks until a writer appears; with
        // O_NONBLOCK it returns at once, and the type check below refuses it.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(what) = not_regular(&meta.file_type()) {
        return Err(refused(format!("{what}, not a regular file")));
    }
    if meta.len() > limit {
        return Err(refused(over(meta.len(), limit)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The length was checked, but a file can grow while it is read.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(refused(format!(
            "grew past the {limit}-byte limit while read"
        )));
    }
    Ok(bytes)
}

/// [`read`] of a text file.
///
/// # Errors
/// As [`read`], and `InvalidData` when the bytes are not UTF-8.
pub(crate) fn read_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// What a file that is not a regular file is, in words.
fn not_regular(kind: &std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

fn over(len: u64, limit: u64) -> String {
    format!("{len} bytes, over the {limit}-byte limit")
}

fn refused(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "x = 1\n").unwrap();
        assert_eq!(read_text(&path, 6).unwrap(), "x = 1\n");
        let error = read(&path, 5).unwrap_err();
        assert!(
            error.to_string().contains("6 bytes, over the 5-byte limit"),
            "{error}"
        );
    }

    #[test]
    fn a_fifo_a_device_or_a_directory_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let cases = [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ];
        for (path, what) in cases {
            let error = read(path, 1 << 20).unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
            assert!(
                error.to_string().contains(what),
                "{}: {error}",
                path.display()
            );
        }
        let missing = read(&dir.path().join("absent"), 10).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
