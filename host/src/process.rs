//! How this process is named where other processes see it: the lease's
//! holder column, and each PostgreSQL connection's `application_name`.

/// `HOSTNAME:PID`: unique among live processes of a store's hosts, and
/// says where to look.
pub(crate) fn identity() -> String {
    identity_of(std::process::id())
}

/// What process `pid` of this machine is called by [`identity`].
pub(crate) fn identity_of(pid: u32) -> String {
    format!("{}:{pid}", machine())
}

/// This machine's name, as the kernel has it.
pub(crate) fn machine() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
