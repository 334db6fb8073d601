//! One system call per commit into a SQLite write-ahead log.
//!
//! SQLite writes each frame of its log with two `pwrite`s (its 24-byte
//! header, then the page), so a commit of eight creates, which dirties about
//! thirteen pages, made twenty-seven system calls; the kernel's per-call
//! and per-touched-page work was a fifth of a create. The writer's
//! connection therefore opens its files through a thin VFS of ours,
//! `beehive-wal`, over the platform's own: writes to the log that follow one
//! another are gathered in memory and written with one call.
//!
//! The invariant that makes this safe: **nothing SQLite has published is
//! ever still in the buffer.** SQLite publishes a commit (the wal-index
//! header other connections read) only after it has written the commit's
//! last frame, the one whose header carries the database size; the buffer is
//! written out as soon as that frame's page is in it, inside the same
//! `xWrite`, so a failed write fails the commit as it would have without
//! us. Every other call on the log (a read, a size, a sync, a truncate, a
//! close) writes the buffer out first, so SQLite never sees the file behind
//! its own writes. Frames of a transaction that rolls back after spilling
//! pages are written out before the write lock is let go (the database
//! file's `xShmLock`), so another writer's frames at the same offsets are
//! never overwritten by stale ones.
//!
//! The buffer holds at most [`CAPACITY`] bytes; a larger transaction is
//! written in pieces, and each piece goes to the platform's VFS in writes of
//! at most [`MOST_PER_WRITE`] bytes, the most it takes in one call.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::ffi;

/// The name the writer's connection opens its database with.
pub(crate) const VFS_NAME: &CStr = c"beehive-wal";

/// The most bytes of log gathered before they are written out (256 KiB:
/// about 60 frames of 4 KiB pages; a commit of a full batch is far less).
const CAPACITY: usize = 256 << 10;

/// The most bytes passed to the platform's `xWrite` at once: the unix VFS
/// keeps only the low 17 bits of a write's length (128 KiB), and a longer
/// one fails as if the disk were full.
const MOST_PER_WRITE: usize = 64 << 10;

/// A log frame's header: page number, database size (non-zero on a
/// commit's last frame), two salts, two checksums.
const FRAME_HEADER: usize = 24;

/// Registers the VFS once, over the platform's default one.
///
/// # Errors
/// The SQLite result code when there is no default VFS or registering fails.
pub(crate) fn register() -> Result<(), c_int> {
    static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find with NULL returns the default VFS, which
        // lives as long as the process; the copy we register is leaked, so
        // it does too, as SQLite requires of a registered VFS.
        unsafe {
            let real = ffi::sqlite3_vfs_find(ptr::null());
            if real.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            REAL_VFS.get_or_init(|| RealVfs(real));
            let mut vfs = ptr::read(real);
            vfs.szOsFile = c_int::try_from(real_file_offset()).map_err(|_| ffi::SQLITE_ERROR)?
                + (*real).szOsFile;
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = ptr::null_mut();
            vfs.xOpen = Some(open);
            let vfs = Box::leak(Box::new(vfs));
            match ffi::sqlite3_vfs_register(vfs, 0) {
                ffi::SQLITE_OK => Ok(()),
                code => Err(code),
            }
        }
    })
}

/// The platform's VFS, which does the real work.
struct RealVfs(*mut ffi::sqlite3_vfs);

// SAFETY: a registered VFS is immutable and used from any thread by SQLite.
unsafe impl Send for RealVfs {}
// SAFETY: as above.
unsafe impl Sync for RealVfs {}

static REAL_VFS: OnceLock<RealVfs> = OnceLock::new();

/// A file opened through this VFS: SQLite sees `base`; the platform's file
/// follows this struct in the same allocation.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// Some on a write-ahead log.
    log: Option<Box<LogBuffer>>,
    /// On a database file: its open log, whose buffer goes out before a
    /// wal-index lock changes.
    linked_log: *mut ShimFile,
    /// On a log: the database file that links to it.
    linked_db: *mut ShimFile,
}

fn real_file_offset() -> usize {
    size_of::<ShimFile>().next_multiple_of(16)
}

/// Gathered log writes: `bytes` belong at `start` in the file.
#[derive(Default)]
struct LogBuffer {
    start: i64,
    bytes: Vec<u8>,
    /// Where the page of a commit's last frame begins, once its header is in.
    commit_page_at: Option<i64>,
}

/// What [`LogBuffer::take`] asks of the caller.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Keep gathering.
    Gather,
    /// Write the buffer out now.
    WriteOut,
}

impl LogBuffer {
    /// Whether a write at `offset` continues the buffer.
    fn continues(&self, offset: i64) -> bool {
        self.bytes.is_empty() || self.end() == offset
    }

    fn end(&self) -> i64 {
        // A buffer holds at most CAPACITY bytes, far below i64::MAX.
        self.start + self.bytes.len() as i64
    }

    /// Adds a write that [`LogBuffer::continues`] the buffer.
    fn take(&mut self, offset: i64, data: &[u8]) -> Next {
        if self.bytes.is_empty() {
            self.start = offset;
        }
        self.bytes.extend_from_slice(data);
        if data.len() == FRAME_HEADER && data[4..8] != [0; 4] {
            self.commit_page_at = Some(offset + FRAME_HEADER as i64);
            return Next::Gather;
        }
        if self.commit_page_at == Some(offset) || self.bytes.len() >= CAPACITY {
            return Next::WriteOut;
        }
        Next::Gather
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.commit_page_at = None;
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite hands us szOsFile bytes at `file`, room for a ShimFile
    // and the real file after it; REAL_VFS is set before registering.
    unsafe {
        let Some(real_vfs) = REAL_VFS.get() else {
            return ffi::SQLITE_ERROR;
        };
        let shim = file.cast::<ShimFile>();
        let real = file
            .cast::<u8>()
            .add(real_file_offset())
            .cast::<ffi::sqlite3_file>();
        ptr::write(
            shim,
            ShimFile {
                base: ffi::sqlite3_file {
                    pMethods: ptr::null(),
                },
                real,
                log: None,
                linked_log: ptr::null_mut(),
                linked_db: ptr::null_mut(),
            },
        );
        let Some(real_open) = (*real_vfs.0).xOpen else {
            return ffi::SQLITE_ERROR;
        };
        let rc = real_open(real_vfs.0, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
            return rc;
        }
        if flags & ffi::SQLITE_OPEN_WAL != 0 {
            (*shim).log = Some(Box::default());
            link_to_database(shim, name);
        }
        (*shim).base.pMethods = &METHODS;
        rc
    }
}

/// Lets the log's database file find the log, when it was opened here too.
///
/// # Safety
/// `shim` is an open log; `name` is the name SQLite opened it with.
unsafe fn link_to_database(shim: *mut ShimFile, name: *const c_char) {
    // SAFETY: SQLite documents sqlite3_database_file_object for the names
    // it passes to xOpen for a log; the file it returns is open and
    // outlives the log, which SQLite closes first.
    unsafe {
        let db = ffi::sqlite3_database_file_object(name);
        if !db.is_null() && ptr::eq((*db).pMethods, &METHODS) {
            let db = db.cast::<ShimFile>();
            (*db).linked_log = shim;
            (*shim).linked_db = db;
        }
    }
}

/// Writes out the buffer of `shim`, if it is a log holding any.
///
/// # Safety
/// `shim` is an open file of this VFS.
unsafe fn write_out(shim: *mut ShimFile) -> c_int {
    // SAFETY: the caller's promise; the real file is open while ours is.
    unsafe {
        let Some(log) = (*shim).log.as_mut() else {
            return ffi::SQLITE_OK;
        };
        if log.bytes.is_empty() {
            return ffi::SQLITE_OK;
        }
        let real = (*shim).real;
        let Some(real_write) = (*(*real).pMethods).xWrite else {
            log.clear();
            return ffi::SQLITE_IOERR_WRITE;
        };
        let mut rc = ffi::SQLITE_OK;
        let mut offset = log.start;
        for piece in log.bytes.chunks(MOST_PER_WRITE) {
            // MOST_PER_WRITE keeps a piece's length far below c_int::MAX.
            rc = real_write(real, piece.as_ptr().cast(), piece.len() as c_int, offset);
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += piece.len() as i64;
        }
        log.clear();
        rc
    }
}

/// The real file's methods, for passing a call through.
///
/// # Safety
/// `shim` is an open file of this VFS.
unsafe fn real(
    shim: *mut ffi::sqlite3_file,
) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
    // SAFETY: the caller's promise; an open real file has its methods,
    // which the platform VFS keeps in statics.
    unsafe {
        let real = (*shim.cast::<ShimFile>()).real;
        (real, &*(*real).pMethods)
    }
}

/// Writes out the buffer, then passes the call through.
macro_rules! after_write_out {
    ($file:expr, $method:ident, $($arg:expr),*) => {{
        // SAFETY: SQLite calls a file's methods only while it is open.
        unsafe {
            let rc = write_out($file.cast());
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            let (real, methods) = real($file);
            match methods.$method {
                Some(method) => method(real, $($arg),*),
                None => ffi::SQLITE_ERROR,
            }
        }
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes an open file once; after this it is memory.
    unsafe {
        let shim = file.cast::<ShimFile>();
        let written = write_out(shim);
        if !(*shim).linked_db.is_null() {
            (*(*shim).linked_db).linked_log = ptr::null_mut();
        }
        if !(*shim).linked_log.is_null() {
            (*(*shim).linked_log).linked_db = ptr::null_mut();
        }
        let (real, methods) = real(file);
        let closed = methods.xClose.map_or(ffi::SQLITE_OK, |close| close(real));
        ptr::drop_in_place(shim);
        if written != ffi::SQLITE_OK {
            written
        } else {
            closed
        }
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    after_write_out!(file, xRead, buf, amount, offset)
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite passes `amount` readable bytes at `data`.
    unsafe {
        let shim = file.cast::<ShimFile>();
        let Some(log) = (*shim).log.as_mut() else {
            let (real, methods) = real(file);
            return methods
                .xWrite
                .map_or(ffi::SQLITE_ERROR, |w| w(real, data, amount, offset));
        };
        let Ok(length) = usize::try_from(amount) else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), length);
        if !log.continues(offset) {
            let rc = write_out(shim);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        let Some(log) = (*shim).log.as_mut() else {
            return ffi::SQLITE_ERROR;
        };
        match log.take(offset, bytes) {
            Next::Gather => ffi::SQLITE_OK,
            Next::WriteOut => write_out(shim),
        }
    }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    after_write_out!(file, xTruncate, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    after_write_out!(file, xSync, flags)
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    after_write_out!(file, xFileSize, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_write_out!(file, xLock, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_write_out!(file, xUnlock, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    after_write_out!(file, xCheckReservedLock, out)
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    after_write_out!(file, xFileControl, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls a file's methods only while it is open.
    unsafe {
        let (real, methods) = real(file);
        methods.xSectorSize.map_or(4096, |m| m(real))
    }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as above.
    unsafe {
        let (real, methods) = real(file);
        methods.xDeviceCharacteristics.map_or(0, |m| m(real))
    }
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    after_write_out!(file, xShmMap, region, size, extend, out)
}

/// Times a memory barrier found gathered frames still unwritten: zero while
/// SQLite writes a frame as header, then page, and marks a commit's last
/// frame; the tests hold it there.
static LATE_WRITE_OUTS: AtomicU64 = AtomicU64::new(0);

/// Before a wal-index lock changes, the log's buffer goes out: what a
/// rolled-back writer left must not land after another writer's frames.
///
/// # Safety
/// `file` is an open file of this VFS.
unsafe fn write_out_linked_log(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: the caller's promise; a linked log is open (it unlinks itself
    // when it closes).
    unsafe {
        let log = (*file.cast::<ShimFile>()).linked_log;
        if log.is_null() {
            return ffi::SQLITE_OK;
        }
        if (*log)
            .log
            .as_ref()
            .is_some_and(|buffer| !buffer.bytes.is_empty())
        {
            LATE_WRITE_OUTS.fetch_add(1, Ordering::Relaxed);
        }
        write_out(log)
    }
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: SQLite calls a file's methods only while it is open.
    unsafe {
        let rc = write_out_linked_log(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (real, methods) = real(file);
        methods
            .xShmLock
            .map_or(ffi::SQLITE_ERROR, |m| m(real, offset, n, flags))
    }
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: as above. A barrier cannot fail; the commit's own write has
    // already gone out, so this finds the buffer empty.
    unsafe {
        let log = (*file.cast::<ShimFile>()).linked_log;
        if !log.is_null()
            && (*log)
                .log
                .as_ref()
                .is_some_and(|buffer| !buffer.bytes.is_empty())
        {
            LATE_WRITE_OUTS.fetch_add(1, Ordering::Relaxed);
        }
        let _ = write_out_linked_log(file);
        let (real, methods) = real(file);
        if let Some(m) = methods.xShmBarrier {
            m(real);
        }
    }
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    after_write_out!(file, xShmUnmap, delete)
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    after_write_out!(file, xFetch, offset, amount, out)
}

unsafe extern "C" fn unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    after_write_out!(file, xUnfetch, offset, page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(commit: bool) -> [u8; FRAME_HEADER] {
        let mut header = [0; FRAME_HEADER];
        header[3] = 7;
        if commit {
            header[7] = 42;
        }
        header
    }

    #[test]
    fn frames_gather_until_the_commits_last_page_is_in() {
        let mut log = LogBuffer::default();
        let page = vec![1u8; 4096];
        assert_eq!(log.take(32, &header(false)), Next::Gather);
        assert!(log.continues(56));
        assert_eq!(log.take(56, &page), Next::Gather);
        assert_eq!(log.take(4152, &header(true)), Next::Gather);
        assert_eq!(log.take(4176, &page), Next::WriteOut);
        assert_eq!((log.start, log.end()), (32, 8272));
    }

    #[test]
    fn a_write_elsewhere_does_not_continue_the_buffer() {
        let mut log = LogBuffer::default();
        assert!(log.continues(900), "an empty buffer starts anywhere");
        log.take(100, &[0; 10]);
        assert!(log.continues(110));
        assert!(!log.continues(100));
        assert!(!log.continues(120));
        log.clear();
        assert!(log.continues(5) && log.commit_page_at.is_none());
    }

    #[test]
    fn a_full_buffer_goes_out_without_a_commit() {
        let mut log = LogBuffer::default();
        let page = vec![0u8; 4096];
        let mut offset = 0;
        let mut next = Next::Gather;
        while next == Next::Gather {
            next = log.take(offset, &page);
            offset += 4096;
        }
        assert_eq!(log.bytes.len(), CAPACITY);
    }

    fn open_through_the_vfs(path: &std::path::Path) -> rusqlite::Connection {
        register().unwrap();
        let conn = rusqlite::Connection::open_with_flags_and_vfs(
            path,
            rusqlite::OpenFlags::default(),
            VFS_NAME,
        )
        .unwrap();
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))
            .unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn
    }

    /// A database in `dir` with table `t`, and the writer on it through the VFS.
    fn writer_with_table(dir: &tempfile::TempDir) -> (std::path::PathBuf, rusqlite::Connection) {
        let path = dir.path().join("t.db");
        let writer = open_through_the_vfs(&path);
        writer
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
            .unwrap();
        (path, writer)
    }

    fn insert(conn: &rusqlite::Connection, body: String) {
        conn.execute("INSERT INTO t (body) VALUES (?1)", [body])
            .unwrap();
    }

    fn count(conn: &rusqlite::Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap()
    }

    /// The rows of `t`, as a new connection through the default VFS reads
    /// them, once it has found the database intact.
    fn rows_when_intact(path: &std::path::Path) -> i64 {
        let check = rusqlite::Connection::open(path).unwrap();
        let verdict: String = check
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(verdict, "ok");
        count(&check)
    }

    #[test]
    fn another_connection_sees_each_commit_as_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = writer_with_table(&dir);
        let reader = rusqlite::Connection::open(&path).unwrap();
        for i in 1..=50 {
            insert(&writer, format!("row {i}").repeat(40));
            assert_eq!(count(&reader), i);
        }
        assert_eq!(
            LATE_WRITE_OUTS.load(Ordering::Relaxed),
            0,
            "each commit went out in its own xWrite, not at the barrier before its publication"
        );
    }

    /// The adversary: a commit larger than the platform VFS takes in one
    /// write (its length keeps only 17 bits; more failed as "disk full").
    #[test]
    fn a_commit_larger_than_one_write_and_than_the_buffer_lands_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = writer_with_table(&dir);
        writer.execute_batch("BEGIN").unwrap();
        // About 1.2 MiB of rows: several buffers' worth, each many writes.
        for i in 0..300 {
            insert(&writer, format!("{i:04}").repeat(1_000));
        }
        writer.execute_batch("COMMIT").unwrap();
        assert_eq!(rows_when_intact(&path), 300);
    }

    /// The adversary: a transaction that spills frames to the log and then
    /// rolls back, after which another connection writes frames at the same
    /// offsets. The rolled-back frames must not land on top of them.
    #[test]
    fn frames_of_a_rolled_back_spill_never_overwrite_another_writers_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = writer_with_table(&dir);
        writer.execute_batch("PRAGMA cache_size = 10").unwrap();
        writer.execute_batch("BEGIN").unwrap();
        for i in 0..400 {
            insert(&writer, format!("spilled {i}").repeat(30));
        }
        writer.execute_batch("ROLLBACK").unwrap();
        let other = rusqlite::Connection::open(&path).unwrap();
        for i in 0..100 {
            insert(&other, format!("other {i}").repeat(30));
        }
        insert(&writer, "after".into());
        drop((writer, other));
        assert_eq!(rows_when_intact(&path), 101);
    }
}
