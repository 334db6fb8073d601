//! How this process is named where other processes see it: the lease's
//! holder column, and each PostgreSQL connection's `application_name`.

/// `HOSTNAME:PID`: unique among live processes of a store's hosts, and
/// says where to look.
pub(crate) fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}", std::process::id())
}
