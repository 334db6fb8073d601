//! A directory granted to a plugin, held open from the moment its policy is
//! checked for as long as the grant lives.
//!
//! The adversary is the plugin itself, or another plugin granted a directory
//! that holds this one: either can rename the checked directory away and put
//! a symlink to `/` in its place. Opening the grant's path again for each
//! new instance would follow that symlink. So the path is opened once, one
//! component at a time without following symlinks, and every instance gets
//! that same open directory (reopened through `/proc/self/fd`, which names
//! the directory the handle holds, wherever it has moved). Before each new
//! instance the path is checked again: if it no longer leads, without
//! symlinks, to the directory held, the instance is refused, so a grant
//! that changed under the host is seen and said rather than silently kept.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// An open directory and which one it is.
pub(crate) struct DirHandle {
    fd: OwnedFd,
    /// The device and inode it had when opened.
    identity: (u64, u64),
}

impl DirHandle {
    /// Opens `path`, which must be absolute, without following a symlink at
    /// any component.
    ///
    /// # Errors
    /// Which component is not a directory (a symlink among them), or the
    /// system's error.
    pub(crate) fn open(path: &Path) -> Result<DirHandle, String> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::open("/", flags, Mode::empty()).map_err(|e| e.to_string())?;
        let mut walked = PathBuf::from("/");
        for component in path.components() {
            match component {
                Component::RootDir => {}
                Component::Normal(name) => {
                    walked.push(name);
                    fd = rustix::fs::openat(&fd, name, flags, Mode::empty()).map_err(
                        |e| match e {
                            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => format!(
                                "{} is not a directory (a symlink is never followed in a grant)",
                                walked.display()
                            ),
                            other => format!("{}: {other}", walked.display()),
                        },
                    )?;
                }
                other => return Err(format!("{}: unexpected part {other:?}", path.display())),
            }
        }
        let stat = rustix::fs::fstat(&fd).map_err(|e| e.to_string())?;
        Ok(DirHandle {
            fd,
            identity: (stat.st_dev, stat.st_ino),
        })
    }

    /// The filesystem it is on.
    pub(crate) fn device(&self) -> u64 {
        self.identity.0
    }

    /// Whether `path` still leads, without symlinks, to this directory.
    ///
    /// # Errors
    /// What it leads to instead, in words.
    pub(crate) fn still_at(&self, path: &Path) -> Result<(), String> {
        let now = DirHandle::open(path)?;
        if now.identity != self.identity {
            return Err(format!(
                "{} is no longer the directory the policy granted (it was moved or replaced)",
                path.display()
            ));
        }
        Ok(())
    }

    /// A path that opens exactly this directory, wherever it now is.
    pub(crate) fn reopen_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

impl PartialEq for DirHandle {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl Eq for DirHandle {}

impl std::fmt::Debug for DirHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DirHandle(dev {}, inode {})",
            self.identity.0, self.identity.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_directory_stays_itself_when_its_path_is_swapped_for_a_symlink() {
        let world = tempfile::tempdir().unwrap();
        let root = world.path().canonicalize().unwrap();
        let inner = root.join("inner");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(inner.join("mine.txt"), "granted").unwrap();
        let held = DirHandle::open(&inner).unwrap();
        assert!(held.still_at(&inner).is_ok());

        std::fs::rename(&inner, root.join("moved")).unwrap();
        std::os::unix::fs::symlink("/", &inner).unwrap();
        let error = held.still_at(&inner).unwrap_err();
        assert!(error.contains("not a directory"), "{error}");
        let reopened = held.reopen_path().join("mine.txt");
        assert_eq!(std::fs::read_to_string(reopened).unwrap(), "granted");

        std::fs::remove_file(&inner).unwrap();
        std::fs::create_dir(&inner).unwrap();
        let error = held.still_at(&inner).unwrap_err();
        assert!(error.contains("no longer the directory"), "{error}");
    }

    #[test]
    fn a_symlink_anywhere_on_the_path_is_refused() {
        let world = tempfile::tempdir().unwrap();
        let root = world.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("real/out")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let error = DirHandle::open(&root.join("link/out")).unwrap_err();
        assert!(error.contains("link is not a directory"), "{error}");
    }
}
