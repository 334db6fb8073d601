//! `beehive backup` of a busy store, `beehive restore` on another path, and
//! the scheduled backups of `run --backup-dir`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use beehive::client::WatchOptions;
use beehive::{Error, GroupKind, RawClient, Store};
use beehive_e2e::{Workspace, assert_mentions, command_on, wait_until};
use futures_util::StreamExt;

fn greeting(name: &str) -> String {
    format!("kind: Greeting.example.dev\nname: {name}\nspec: {{name: {name}}}\n")
}

/// The write-log position `backup` printed.
fn position_in(printed: &str) -> i64 {
    printed
        .split("write-log position ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no position in {printed}"))
}

#[test]
fn a_backup_of_a_busy_host_restores_elsewhere_whole_and_converges() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);

    // A create load, one apply after another, counting what was acknowledged.
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (dir, acknowledged, stop) = (
            workspace.path().to_path_buf(),
            acknowledged.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let file = dir.join(format!("g{i}.yaml"));
                std::fs::write(&file, greeting(&format!("g{i}"))).unwrap();
                let applied = command_on(&dir, "beehive.db")
                    .args(["apply", "-f", file.to_str().unwrap()])
                    .output()
                    .unwrap();
                if !applied.status.success() {
                    break;
                }
                acknowledged.store(i + 1, Ordering::SeqCst);
            }
        })
    };
    wait_until("the load is under way", || {
        acknowledged.load(Ordering::SeqCst) >= 20
    });
    let before_backup = acknowledged.load(Ordering::SeqCst);
    let printed = workspace.ok(&["backup", "snap.db"]);
    assert_mentions(&printed, &["backed up", "snap.db", "write-log position"]);
    let position = position_in(&printed);
    let checksum = std::fs::read_to_string(workspace.path().join("snap.db.sha256")).unwrap();
    let sha256 = checksum.split_whitespace().next().unwrap();
    assert!(printed.contains(sha256), "{printed} prints {checksum}");
    // The host dies in the middle of the load.
    host.kill();
    stop.store(true, Ordering::SeqCst);
    load.join().unwrap();

    // A second backup to the same name is refused; the first is untouched.
    let again = workspace.fails(&["backup", "snap.db"]);
    assert_mentions(&again, &["already exists"]);

    // Restored on another path, it holds every create acknowledged before
    // the backup began.
    let elsewhere = Workspace::with_plugins(&["greeting"]);
    let backup = workspace.path().join("snap.db");
    let restored = elsewhere.ok(&["restore", backup.to_str().unwrap()]);
    assert_mentions(&restored, &["restored", "every object owes one pass"]);
    let conn = rusqlite::Connection::open(elsewhere.path().join("beehive.db")).unwrap();
    let verdict: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(verdict, "ok");
    drop(conn);
    let names = elsewhere.ok(&["get", "Greeting", "-o", "name"]);
    for i in 0..before_backup {
        let name = format!("Greeting.example.dev/g{i}\n");
        assert!(
            names.contains(&name),
            "{name} acknowledged before the backup"
        );
    }
    // Restoring over a store is refused.
    let over = elsewhere.fails(&["restore", backup.to_str().unwrap()]);
    assert_mentions(&over, &["exists", "never writes over one"]);

    // A host on the restored store converges it.
    let host = elsewhere.start_host(&[]);
    elsewhere.ok(&[
        "wait",
        "Greeting",
        "--all",
        "--for",
        "settled",
        "--timeout",
        "5m",
    ]);
    host.terminate();

    // A watch resumed from a position after the backup's is refused, not
    // resumed over writes the backup does not hold.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Store::open(elsewhere.path().join("beehive.db")).unwrap();
        let greetings = RawClient::new(&store, GroupKind::new("example.dev", "Greeting"));
        let mut stream = greetings
            .watch_list(WatchOptions::new().resume_from(position + 5))
            .unwrap();
        let first = stream.next().await;
        assert!(
            matches!(first, Some(Err(Error::WatchTooOld { .. }))),
            "{first:?}"
        );
    });
}

#[test]
fn a_damaged_or_incomplete_backup_is_refused_and_nothing_is_made() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    workspace.apply_new_kind("a.yaml", &greeting("a"));
    workspace.ok(&["backup", "snap.db"]);
    let snap = workspace.path().join("snap.db");
    let target = Workspace::new();

    // One flipped byte.
    let mut bytes = std::fs::read(&snap).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(workspace.path().join("flipped.db"), &bytes).unwrap();
    std::fs::copy(
        workspace.path().join("snap.db.sha256"),
        workspace.path().join("flipped.db.sha256"),
    )
    .unwrap();
    let flipped = workspace.path().join("flipped.db");
    let refused = target.fails(&["restore", flipped.to_str().unwrap()]);
    assert_mentions(
        &refused,
        &["invalid backup", "SHA-256", "changed or cut short"],
    );

    // Cut short, and with no checksum file.
    std::fs::write(workspace.path().join("cut.db"), &bytes[..middle]).unwrap();
    let cut = workspace.path().join("cut.db");
    let refused = target.fails(&["restore", cut.to_str().unwrap()]);
    assert_mentions(&refused, &["invalid backup", "checksum file"]);
    let output = target.run(&["restore", cut.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert!(
        !target.path().join("beehive.db").exists(),
        "nothing is left where the store would have been"
    );
    let left: Vec<_> = std::fs::read_dir(target.path()).unwrap().collect();
    assert!(left.is_empty(), "no partial file: {left:?}");

    // The backup itself restores.
    assert_mentions(
        &target.ok(&["restore", snap.to_str().unwrap()]),
        &["restored"],
    );
}

#[test]
fn a_host_takes_scheduled_backups_and_keeps_the_newest() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    std::fs::create_dir(workspace.path().join("backups")).unwrap();
    std::fs::write(workspace.path().join("backups/.old.db.partial-1"), "x").unwrap();
    let host = workspace.start_host(&[
        "--backup-dir",
        "backups",
        "--backup-every",
        "200ms",
        "--backup-keep",
        "2",
    ]);
    workspace.apply("a.yaml", &greeting("a"));
    let backups = |suffix: &str| {
        std::fs::read_dir(workspace.path().join("backups"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("beehive-") && n.ends_with(suffix))
            .count()
    };
    wait_until("backups have been taken and pruned", || {
        let metrics = workspace.ok(&["metrics"]);
        let taken = metrics.lines().any(|l| {
            l.starts_with("beehive_backup_last_success_timestamp_seconds ") && !l.ends_with(" 0")
        });
        taken && host.log().matches("scheduled backup written").count() >= 3
    });
    assert!(backups(".db") <= 2, "at most the newest two are kept");
    assert!(backups(".db.sha256") <= 2);
    assert!(
        !workspace.path().join("backups/.old.db.partial-1").exists(),
        "a killed host's partial backup is removed"
    );
    host.terminate();

    // A backup directory that is a symbolic link is refused at start.
    std::os::unix::fs::symlink("backups", workspace.path().join("link")).unwrap();
    let refused = workspace.fails(&["run", "--backup-dir", "link"]);
    assert_mentions(&refused, &["symbolic link"]);
}
