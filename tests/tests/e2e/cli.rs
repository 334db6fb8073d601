//! The real `beehive` binary: a host in a temporary directory with the
//! example plugins, and the commands an operator runs against it, with and
//! without a host.

use beehive::{CreateOptions, GroupKind, Json, RawClient, Store};
use beehive_e2e::{Workspace, assert_mentions, wait_until};

use crate::TEAM;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn with_plugins() -> Workspace {
    Workspace::with_plugins(&["greeting", "cascade"])
}

#[test]
fn a_host_converges_applied_manifests_hot_swaps_and_cascades_deletes() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    let applied = workspace.apply("team.yaml", TEAM);
    assert_eq!(applied, "GreetingSet.example.dev/team created\n");

    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    workspace.ok(&["wait", "Greeting", "team-ada", "--for", "settled"]);
    let every = workspace.ok(&[
        "wait",
        "Greeting",
        "--all",
        "--for",
        "jsonpath={.status.message}",
    ]);
    assert_eq!(
        every,
        "Greeting/team-ada: with {.status.message} set\n\
         Greeting/team-grace: with {.status.message} set\n"
    );
    workspace.ok(&[
        "wait",
        "Greeting/team-ada",
        "--for",
        "jsonpath={.status.message}=Hello, ada!",
    ]);
    let unnamed = workspace.run(&["wait", "Greeting", "--for", "settled"]);
    assert_eq!(unnamed.status.code(), Some(2), "{unnamed:?}");
    assert_mentions(&String::from_utf8_lossy(&unnamed.stderr), &["--all"]);
    let ada = json(&workspace.ok(&["get", "Greeting", "team-ada", "-o", "json"]));
    assert_eq!(ada["status"]["message"], "Hello, ada!");
    let team = json(&workspace.ok(&["get", "GreetingSet", "team", "-o", "json"]));
    let ready = &team["conditions"][0];
    assert!(
        ready["transitionedAt"].is_string(),
        "camelCase keys: {ready}"
    );
    let table = workspace.ok(&["get", "GreetingSet"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert_mentions(&table, &["team", "True"]);
    let names = workspace.ok(&["get", "Greeting", "-o", "name"]);
    assert_eq!(
        names,
        "Greeting.example.dev/team-ada\nGreeting.example.dev/team-grace\n"
    );

    // get all: a table per kind, each name with its kind.
    let all = workspace.ok(&["get", "all"]);
    assert_mentions(
        &all,
        &[
            "Greeting.example.dev/team-ada",
            "GreetingSet.example.dev/team",
        ],
    );
    assert_eq!(all.matches("NAME").count(), 2, "a table per kind: {all}");
    let all = workspace.ok(&["get", "all", "-o", "name"]);
    assert_eq!(all.lines().count(), 3, "{all}");

    // A new version of a plugin, renamed into place, rewrites every greeting.
    let plugins = workspace.ok(&["plugins", "-o", "json"]);
    workspace.install_plugin("greeting_v2", "greeting.wasm");
    workspace.ok(&[
        "wait",
        "Greeting",
        "team-ada",
        "--for",
        "jsonpath={.status.release}=2",
        "--timeout",
        "10m",
    ]);
    wait_until("the new version's status is on every greeting", || {
        let all = json(&workspace.ok(&["get", "Greeting", "-o", "json"]));
        all.as_array()
            .unwrap()
            .iter()
            .all(|g| g["status"]["release"] == 2)
    });
    assert_ne!(
        workspace.ok(&["plugins", "-o", "json"]),
        plugins,
        "the version changed"
    );
    // The swap is revision 2 of the kind, rolled out to both greetings.
    let rolled = workspace.ok(&["rollout", "status", "greetings", "--timeout", "10m"]);
    assert_mentions(
        &rolled,
        &[
            "rollout of Greeting.example.dev to revision 2",
            "complete",
            "2 objects passed",
        ],
    );
    let history = json(&workspace.ok(&["rollout", "history", "Greeting", "-o", "json"]));
    let states: Vec<_> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64(),
                r["state"].as_str(),
                r["objects"].as_i64(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (Some(1), Some("complete"), Some(0)),
            (Some(2), Some("complete"), Some(2))
        ],
        "{history}"
    );
    assert_ne!(history[0]["content_hash"], history[1]["content_hash"]);
    let table = workspace.ok(&["rollout", "history", "Greeting"]);
    assert!(table.starts_with("REVISION"), "{table}");

    let describe = workspace.ok(&["describe", "GreetingSet", "team"]);
    for expected in [
        "Children:",
        "team-ada",
        "Depends on:",
        "AllGreeted",
        "Next pass:",
    ] {
        assert!(describe.contains(expected), "{expected} in {describe}");
    }

    // Deleting the owner takes its children down, then its finalizer.
    let deleted = workspace.ok(&["delete", "GreetingSet.example.dev", "team"]);
    assert_mentions(&deleted, &["waiting on finalizers: example.dev/greetings"]);
    workspace.ok(&["wait", "Greeting", "team-ada", "--for", "delete"]);
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "delete"]);
    host.terminate();
}

#[test]
fn a_host_with_a_tiny_work_queue_still_greets_every_applied_object() {
    let workspace = with_plugins();
    let host = workspace.start_host(&["--queue-capacity", "4", "--requeue-floor", "10ms"]);
    let manifests: String = (0..60)
        .map(|i| {
            format!("{{\"kind\":\"Greeting\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}\n")
        })
        .collect();
    workspace.apply("many.json", &manifests);
    wait_until("all 60 greetings are greeted", || {
        let all = json(&workspace.ok(&["get", "Greeting", "-o", "json"]));
        let all = all.as_array().unwrap();
        all.len() == 60 && all.iter().all(|g| g["status"]["message"].is_string())
    });
    host.terminate();
    let refused = workspace.fails(&["run", "--queue-capacity", "1"]);
    assert_mentions(&refused, &["--queue-capacity"]);
}

#[test]
fn a_killed_host_restarts_and_everything_converges_with_nothing_lost() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    let objects: Vec<String> = (0..60)
        .map(|i| format!("{{\"kind\":\"Greeting.example.dev\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n{i}\"}}}}"))
        .collect();
    workspace.apply("many.json", &format!("[{}]", objects.join(",")));
    workspace.apply("team.yaml", TEAM);
    host.kill();

    // The killed host left its socket behind; commands still work.
    assert!(workspace.path().join("beehive.db.sock").exists());
    let listed = json(&workspace.ok(&["get", "Greeting", "-o", "json"]));
    assert!(
        listed.as_array().unwrap().len() >= 60,
        "every committed object is there"
    );

    let host = workspace.start_host(&[]);
    for i in 0..60 {
        workspace.ok(&["wait", "Greeting", &format!("g{i}"), "--for", "settled"]);
    }
    workspace.ok(&[
        "wait",
        "GreetingSet",
        "team",
        "--for",
        "condition=Ready=True",
    ]);
    let g7 = json(&workspace.ok(&["get", "Greeting", "g7", "-o", "json"]));
    assert_eq!(g7["status"]["message"], "Hello, n7!");
    host.terminate();
}

#[test]
fn commands_work_without_a_host() {
    let workspace = Workspace::new();
    workspace.write(
        "team.yaml",
        &TEAM.replace("finalizers: [example.dev/greetings]", ""),
    );
    // No host has served the kind yet, so only `--new-kind` creates it.
    assert_eq!(
        workspace.ok(&["apply", "-f", "team.yaml", "--new-kind"]),
        "GreetingSet.example.dev/team created\n"
    );
    assert_eq!(
        workspace.ok(&["apply", "-f", "team.yaml"]),
        "GreetingSet.example.dev/team unchanged\n"
    );
    let team = json(&workspace.ok(&["get", "GreetingSet", "team", "-o", "json"]));
    assert_eq!(team["spec"]["names"][1], "grace");
    assert_mentions(
        &workspace.ok(&["get", "GreetingSet", "-o", "yaml"]),
        &["name: team"],
    );
    assert_mentions(
        &workspace.ok(&["describe", "GreetingSet", "team"]),
        &["no host is running"],
    );
    assert_eq!(
        workspace.ok(&["events", "GreetingSet", "team"]),
        "No events.\n"
    );
    assert!(workspace.ok(&["plugins"]).contains("No host is running"));
    let waited = workspace.fails(&[
        "wait",
        "GreetingSet",
        "team",
        "--for",
        "settled",
        "--timeout",
        "300ms",
    ]);
    assert_mentions(&waited, &["timed out", "no host is running"]);
    assert_mentions(
        &workspace.fails(&["requeue", "GreetingSet", "team"]),
        &["needs a running host"],
    );
    let deleted = workspace.ok(&["delete", "GreetingSet", "team"]);
    assert_mentions(&deleted, &["marked for deletion"]);
    let wide = workspace.ok(&["get", "GreetingSet", "-o", "wide"]);
    assert!(
        wide.contains("DELETING") && !wide.trim_end().ends_with('-'),
        "{wide}"
    );
    assert!(!workspace.path().join("beehive.db.sock").exists());
}

#[test]
fn a_host_collects_a_deleted_record_of_a_kind_no_plugin_serves_at_once() {
    let workspace = Workspace::new();
    // The sweep's round is 30 s by default; the deletion must not wait for it.
    let host = workspace.start_host(&[]);
    workspace.write("note.yaml", "kind: Note.scratch.dev\nname: a\nspec: {}\n");
    workspace.ok(&["apply", "-f", "note.yaml", "--new-kind"]);
    let deleted = std::time::Instant::now();
    workspace.ok(&["delete", "Note", "a"]);
    wait_until("the record is collected", || {
        workspace.run(&["get", "Note", "a"]).status.code() == Some(3)
    });
    let took = deleted.elapsed();
    assert!(
        took < std::time::Duration::from_secs(15),
        "collected after {took:?}: by the sweep's round, not at once"
    );
    host.terminate();
}

#[test]
fn plugins_wait_waits_for_a_file_dropped_a_moment_ago() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&[]);
    workspace.ok(&["plugins", "--wait"]);
    // The host's watch has not noticed the file yet when the command asks.
    workspace.install_plugin("conditions", "conditions.wasm");
    let listed = workspace.ok(&["plugins", "--wait"]);
    assert_mentions(&listed, &["conditions.wasm", "Service.example.dev"]);
    host.terminate();
}

#[test]
fn plugins_check_compiles_into_the_cache_its_host_then_serves_from() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    workspace.apply_new_kind("note.yaml", "kind: Note\nname: a\nspec: {}\n");
    workspace.ok(&["plugins", "check", "plugins/greeting.wasm"]);
    let host = workspace.start_host(&[]);
    let log = host.log();
    assert!(!log.contains("compiling"), "compiled twice: {log}");
    host.terminate();
}

#[test]
fn version_and_api_resources_name_the_build_the_host_the_store_and_its_kinds() {
    let workspace = Workspace::new();
    let alone = workspace.ok(&["version"]);
    assert_mentions(
        &alone,
        &[
            "Client:  beehive ",
            "contract beehive:controller@",
            "Host:    none running",
            "Store:   none at beehive.db yet",
        ],
    );
    assert!(
        !workspace.path().join("beehive.db").exists(),
        "version makes no store"
    );
    let host = workspace.start_host(&[]);
    let running = workspace.ok(&["version"]);
    assert_mentions(
        &running,
        &[
            &format!("pid {}", host.pid()),
            "beehive.db (SQLite), schema version ",
        ],
    );
    let printed = json(&workspace.ok(&["version", "-o", "json"]));
    assert_eq!(printed["host"]["pid"], host.pid());
    assert!(printed["store"]["schema_version"].as_i64().unwrap() > 0);

    // The kinds the store knows, as kubectl's api-resources lists them.
    workspace.apply_new_kind("note.yaml", "kind: Note.x.dev\nname: a\nspec: {}\n");
    let kinds = workspace.ok(&["api-resources"]);
    assert_mentions(&kinds, &["KIND", "SERVED BY", "OBJECTS"]);
    let note = kinds
        .lines()
        .find(|l| l.starts_with("Note "))
        .unwrap_or_default();
    let cells: Vec<&str> = note.split_whitespace().collect();
    assert_eq!(cells, ["Note", "x.dev", "-", "-", "-", "1", "1"], "{kinds}");
    let listed = json(&workspace.ok(&["api-resources", "-o", "json"]));
    assert_eq!(listed[0]["objects"], 1);
    host.terminate();
}

#[test]
fn delete_all_ignore_not_found_and_no_headers_as_kubectl_does() {
    let workspace = Workspace::new();
    workspace.write(
        "notes.yaml",
        "kind: Note\nname: a\nspec: {}\n---\nkind: Note\nname: b\nspec: {}\n---\n\
         kind: Memo\nname: keep\nspec: {}\n",
    );
    workspace.ok(&["apply", "-f", "notes.yaml", "--new-kind"]);

    let missing = workspace.run(&["delete", "Note", "nope"]);
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    let ignored = workspace.run(&["delete", "Note", "nope", "--ignore-not-found"]);
    assert!(ignored.status.success(), "{ignored:?}");
    assert!(
        ignored.stdout.is_empty() && ignored.stderr.is_empty(),
        "{ignored:?}"
    );
    let mixed = workspace.ok(&["delete", "Note", "nope", "a", "--ignore-not-found"]);
    assert_mentions(&mixed, &["Note/a marked for deletion"]);

    let all = workspace.ok(&["delete", "Note", "--all"]);
    assert_mentions(&all, &["Note/b marked for deletion"]);
    let memo = workspace.ok(&["get", "Memo", "-o", "name"]);
    assert_eq!(memo, "Memo/keep\n", "another kind is left alone");
    let usage = workspace.run(&["delete", "Note", "a", "--all"]);
    assert_eq!(usage.status.code(), Some(2), "names and --all conflict");
    let gone = workspace.run(&["delete", "Gone", "--all", "--ignore-not-found"]);
    assert!(gone.status.success(), "{gone:?}");

    let rows = workspace.ok(&["get", "Memo", "--no-headers"]);
    assert!(rows.starts_with("keep "), "no header line: {rows}");
    assert_eq!(rows.lines().count(), 1, "{rows}");
}

#[test]
fn jsonpath_custom_columns_and_sort_by_print_what_kubectl_would() {
    let workspace = Workspace::new();
    workspace.write(
        "ports.yaml",
        "kind: Port\nname: web\nspec: {port: 8080, tags: [a, b]}\n---\n\
         kind: Port\nname: db\nspec: {port: 5432}\n---\n\
         kind: Port\nname: dns\nspec: {port: 53}\n",
    );
    workspace.ok(&["apply", "-f", "ports.yaml", "--new-kind"]);

    let one = workspace.ok(&["get", "Port/web", "-o", "jsonpath={.spec.port}"]);
    assert_eq!(one, "8080");
    let names = workspace.ok(&[
        "get",
        "Port",
        "--sort-by",
        ".spec.port",
        "-o",
        "jsonpath={.items[*].name}",
    ]);
    assert_eq!(names, "dns db web", "sorted by port, numerically");
    let ranged = workspace.ok(&[
        "get",
        "Port",
        "--sort-by",
        "{.name}",
        "-o",
        r#"jsonpath={range .items[?(@.spec.port > 100)]}{.name}:{.spec.port}{"\n"}{end}"#,
    ]);
    assert_eq!(ranged, "db:5432\nweb:8080\n");

    let table = workspace.ok(&[
        "get",
        "Port",
        "--sort-by",
        ".name",
        "-o",
        "custom-columns=NAME:.name,PORT:.spec.port,TAGS:.spec.tags[*]",
    ]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "PORT", "TAGS"],
            vec!["db", "5432", "<none>"],
            vec!["dns", "53", "<none>"],
            vec!["web", "8080", "a,b"],
        ],
        "{table}"
    );
    let bare = workspace.ok(&[
        "get",
        "Port",
        "--no-headers",
        "-o",
        "custom-columns=N:.name",
    ]);
    assert_eq!(bare.lines().count(), 3, "{bare}");

    let wrong = workspace.run(&["get", "Port", "-o", "xml"]);
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert_mentions(
        &String::from_utf8_lossy(&wrong.stderr),
        &["jsonpath=TEMPLATE", "custom-columns=HEADER:PATH"],
    );
    let unclosed = workspace.run(&["get", "Port", "-o", "jsonpath={.items"]);
    assert_mentions(
        &String::from_utf8_lossy(&unclosed.stderr),
        &["never closed"],
    );
}

#[test]
fn bad_input_is_one_line_a_failing_exit_and_no_partial_write() {
    let workspace = Workspace::new();
    assert_mentions(&workspace.fails(&["get", "Greeting"]), &["no database at"]);
    assert!(
        !workspace.path().join("beehive.db").exists(),
        "reads create nothing"
    );
    assert!(
        !workspace.path().join("beehive.db.lock").exists(),
        "not even a lock file"
    );
    // The first apply makes the database, and says so.
    workspace.write("first.yaml", "kind: Note\nname: first\nspec: {}\n");
    let first = workspace.run(&["apply", "-f", "first.yaml", "--new-kind"]);
    assert!(first.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&first.stderr),
        &["warning: no database at beehive.db: making a new one"],
    );

    let error = workspace.apply_fails(
        "mixed.yaml",
        "kind: Thing\nname: good\n---\nkind: Thing\nname: \"\"\n",
    );
    assert_mentions(&error, &["mixed.yaml: object 2", "name is empty"]);
    let error = workspace.apply_fails("escape.yaml", "kind: Thing\nname: \"x\\e[2Jy\"\n");
    assert_mentions(&error, &["object 1 (x\\u{1b}[2Jy)", "control characters"]);
    assert!(
        !error.contains('\u{1b}'),
        "the terminal never gets the raw escape"
    );
    assert_mentions(
        &workspace.apply_fails("broken.json", "{\"kind\": "),
        &["invalid JSON"],
    );
    assert_mentions(
        &workspace.fails(&["apply", "-f", "missing.yaml"]),
        &["missing.yaml: no such file"],
    );
    workspace.write("ok.yaml", "kind: Thing\nname: real\n");
    workspace.ok(&["apply", "-f", "ok.yaml", "--new-kind"]);
    let error = workspace.apply_fails(
        "owned.yaml",
        "kind: Thing\nname: a\n---\nkind: Thing\nname: b\nowner: Thing/nobody\n",
    );
    assert_mentions(&error, &["owner", "nobody"]);

    let things = workspace.ok(&["get", "Thing", "-o", "name"]);
    assert_eq!(things, "Thing/real\n", "no bad file applied anything");
    let error = workspace.fails(&["get", "Thnig"]);
    assert_mentions(&error, &["unknown kind Thnig", "Thing"]);
    assert_mentions(
        &workspace.fails(&["get", "Thing", "nobody"]),
        &["not found"],
    );
    assert_mentions(
        &workspace.fails(&["run", "--plugins", "nowhere"]),
        &["nowhere does not exist"],
    );
    assert_mentions(
        &workspace.fails(&["run", "--plugins", "ok.yaml"]),
        &["plugin directory ok.yaml is not a directory"],
    );
    std::fs::create_dir(workspace.path().join("a-directory")).unwrap();
    let error = workspace.fails(&["--db", "a-directory", "get", "Thing"]);
    assert_mentions(&error, &["unable to open database file"]);
    assert_eq!(
        error.matches("a-directory").count(),
        1,
        "named once: {error}"
    );
    assert_mentions(
        &workspace.fails(&["wait", "Thing", "real", "--for", "ready"]),
        &["settled"],
    );
}

#[test]
fn one_host_per_database_and_a_silent_lock_holder_is_named() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    let error = workspace.fails(&["run"]);
    assert_mentions(&error, &["already running"]);
    host.terminate();

    // A process that holds the lock but serves nothing is reported, and the
    // command does not open the database meanwhile.
    let lock = std::fs::File::create(workspace.path().join("beehive.db.lock")).unwrap();
    lock.lock().unwrap();
    let error = workspace.fails(&["get", "Greeting"]);
    assert_mentions(&error, &["does not answer"]);
    drop(lock);
    workspace.ok(&["plugins"]);
}

#[tokio::test]
async fn get_reads_what_a_library_client_wrote() {
    let workspace = Workspace::new();
    {
        let store = Store::open(workspace.path().join("beehive.db")).unwrap();
        let clusters = RawClient::new(&store, GroupKind::new("acme.com", "Cluster"));
        for name in ["a", "b"] {
            let spec = Json::parse(&format!(r#"{{"name":"{name}"}}"#)).unwrap();
            clusters
                .create(name, spec, CreateOptions::new())
                .await
                .unwrap();
        }
    }
    let all = json(&workspace.ok(&["get", "Cluster", "-o", "json"]));
    assert_eq!(all[1]["spec"]["name"], "b");
    assert_eq!(
        workspace.ok(&["get", "Cluster.acme.com", "-o", "name"]),
        "Cluster.acme.com/a\nCluster.acme.com/b\n"
    );
}

#[test]
fn help_and_completions_explain_the_flags() {
    let workspace = Workspace::new();
    let help = workspace.ok(&["run", "--help"]);
    for flag in [
        "--plugins",
        "--manifests",
        "--plugin-deadline",
        "--plugin-memory",
        "--owed-pass-interval",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
    assert!(workspace.ok(&["completions", "bash"]).contains("beehive"));
    // A command that touches no store lists the store's flags apart.
    let new = workspace.ok(&["new", "--help"]);
    let (own, global) = new
        .split_once("Global options (for commands on a store):")
        .unwrap_or_else(|| panic!("no heading for the global flags in {new}"));
    assert!(own.contains("--lang") && !own.contains("--db"), "{new}");
    assert!(
        global.contains("--db") && !global.contains("--lang"),
        "{new}"
    );
}

#[test]
fn completion_offers_the_kinds_and_names_the_store_holds() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply("team.yaml", TEAM);
    workspace.ok(&["wait", "Greeting", "team-grace", "--for", "settled"]);
    let complete = |words: &[&str]| {
        let mut args = vec!["__complete", "--"];
        args.extend(words);
        workspace.ok(&args)
    };
    let kinds = complete(&["get", "greet"]);
    assert_eq!(kinds, "Greeting\nGreetingSet\n");
    assert_eq!(
        complete(&["describe", "Greeting", ""]),
        "team-ada\nteam-grace\n"
    );
    assert_eq!(complete(&["delete", "greetings", "team-g"]), "team-grace\n");
    assert_eq!(
        complete(&["get", "-o", "yaml", "greeting/team-a"]),
        "greeting/team-ada\n"
    );
    assert_eq!(complete(&["get", "-o", ""]), "", "flag values are clap's");
    assert_eq!(
        complete(&["get", "Nothing", ""]),
        "",
        "an unknown kind offers nothing"
    );
    let elsewhere = complete(&["--db", "missing.db", "get", ""]);
    assert_eq!(elsewhere, "", "a store that does not exist is not created");
    assert!(!workspace.path().join("missing.db").exists());

    // The bash script asks the same question from the shell's words.
    let script = workspace.ok(&["completions", "bash"]);
    workspace.write("complete.bash", &script);
    let bin_dir = beehive_e2e::beehive_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shell = std::process::Command::new("bash")
        .current_dir(workspace.path())
        .env("PATH", path)
        .arg("-c")
        .arg(
            "source ./complete.bash; COMP_WORDS=(beehive get Greeting team-); COMP_CWORD=3; \
             _beehive_dynamic; printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .output()
        .expect("bash runs");
    assert_eq!(
        String::from_utf8_lossy(&shell.stdout),
        "team-ada\nteam-grace\n",
        "{}",
        String::from_utf8_lossy(&shell.stderr)
    );
    for shell in ["zsh", "fish"] {
        let script = workspace.ok(&["completions", shell]);
        assert!(
            script.contains("beehive __complete --"),
            "{shell}: {script}"
        );
    }

    // The host answered all of that.
    assert_eq!(complete(&["get", "greeting", "team-a"]), "team-ada\n");
    host.terminate();
    // With none, it reads the store.
    assert_eq!(complete(&["edit", "GreetingSet", ""]), "team\n");
}

#[test]
fn apply_of_a_printed_object_refuses_to_undo_a_change_made_since() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply(
        "ada.yaml",
        "kind: Greeting.example.dev\nname: ada\nspec: {name: Ada}\n",
    );
    let printed = workspace.ok(&["get", "Greeting", "ada", "-o", "yaml"]);
    assert_mentions(&printed, &["generation: 1"]);
    // Someone else changes the spec after it was printed.
    workspace.ok(&[
        "patch",
        "Greeting/ada",
        "-p",
        r#"{"spec":{"name":"Grace"}}"#,
    ]);
    let stale = printed.replace("name: Ada", "name: Ida");
    workspace.write("stale.yaml", &stale);
    let output = workspace.run(&["apply", "-f", "stale.yaml"]);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    assert_mentions(
        &String::from_utf8_lossy(&output.stderr),
        &[
            "changed since the manifest was read",
            "generation 1, now 2",
            "--force-conflicts",
        ],
    );
    let kept = json(&workspace.ok(&["get", "Greeting", "ada", "-o", "json"]));
    assert_eq!(kept["spec"]["name"], "Grace", "nothing was overwritten");
    // The same file forced, or one read again, applies.
    workspace.ok(&["apply", "-f", "stale.yaml", "--force-conflicts"]);
    let reread = workspace.ok(&["get", "Greeting", "ada", "-o", "yaml"]);
    workspace.write("fresh.yaml", &reread.replace("name: Ida", "name: Ola"));
    assert_mentions(
        &workspace.ok(&["apply", "-f", "fresh.yaml"]),
        &["configured"],
    );
    // Applied again as it is (a retry after a lost reply), it is unchanged.
    assert_mentions(
        &workspace.ok(&["apply", "-f", "fresh.yaml"]),
        &["unchanged"],
    );
    // One read from an object since deleted is refused too.
    workspace.ok(&["delete", "Greeting", "ada"]);
    workspace.ok(&["wait", "Greeting", "ada", "--for", "delete"]);
    let gone = workspace.fails(&["apply", "-f", "fresh.yaml"]);
    assert_mentions(&gone, &["no longer exists", "remove `generation`"]);
    host.terminate();
}

#[test]
fn get_watch_streams_changes_from_a_running_host() {
    let workspace = with_plugins();
    assert_mentions(
        &workspace.fails(&["get", "Greeting", "-w"]),
        &["needs a running host"],
    );
    let host = workspace.start_host(&[]);
    workspace.apply(
        "ada.yaml",
        "kind: Greeting.example.dev\nname: ada\nspec: {name: Ada}\n",
    );
    let mut watch = workspace.follow(&["get", "Greeting", "-w", "-o", "json"]);
    let first = json(&watch.next_line());
    assert_eq!(
        (first["type"].as_str(), first["object"]["name"].as_str()),
        (Some("ADDED"), Some("ada"))
    );

    workspace.apply(
        "grace.yaml",
        "kind: Greeting.example.dev\nname: grace\nspec: {name: Grace}\n",
    );
    // Grace arrives, and then her greeting, as the plugin writes it.
    let mut greeted = false;
    while !greeted {
        let line = json(&watch.next_line());
        assert!(line["resourceVersion"].is_i64(), "{line}");
        greeted = line["object"]["name"] == "grace"
            && line["object"]["status"]["message"] == "Hello, Grace!";
    }
    drop(watch);

    // `-o yaml` streams YAML documents, one per change.
    let mut watch = workspace.follow(&["get", "Greeting", "ada", "-w", "-o", "yaml"]);
    assert_eq!(watch.next_line(), "---");
    let document: Vec<String> = (0..3).map(|_| watch.next_line()).collect();
    assert!(
        document.iter().any(|line| line.starts_with("id: ")),
        "{document:?}"
    );
    drop(watch);
    host.terminate();
}

#[test]
fn events_watch_streams_runs_as_the_plugin_records_them() {
    let workspace = Workspace::new();
    let endpoint = beehive_e2e::TestServer::healthy();
    workspace.install_granted(
        "events",
        &format!("[http]\nallow = [{:?}]\n", endpoint.authority()),
    );
    let host = workspace.start_host(&[]);
    workspace.apply("db.json", &format!(
            r#"{{"kind":"Connection.example.dev","name":"db","spec":{{"url":"{}","probe_interval_ms":50}}}}"#,
            endpoint.url("/health")
        ));
    workspace.ok(&["wait", "Connection", "db", "--for", "condition=Connected"]);
    let mut watch = workspace.follow(&[
        "events",
        "Connection",
        "db",
        "--category",
        "connection",
        "-w",
    ]);
    let header = watch.next_line();
    assert!(header.starts_with("TIME"), "{header}");
    // The Connected run grows with every probe: it comes again and again.
    let mut extended = 0;
    while extended < 3 {
        if watch.next_line().contains("✓ Connected") {
            extended += 1;
        }
    }
    drop(watch);
    host.terminate();
}

#[test]
fn a_plugin_granted_a_directory_renders_into_it_and_cleans_up_on_delete() {
    let workspace = Workspace::new();
    let out = workspace.path().join("site");
    std::fs::create_dir(&out).unwrap();
    workspace.install_granted(
        "render",
        &format!(
            "[files.\"/out\"]\npath = {:?}\naccess = \"read-write\"\nallow_store_filesystem = true\n\n[config]\nfooter = \"served by beehive\"\n",
            out.display().to_string()
        ),
    );
    let host = workspace.start_host(&[]);
    let plugins = workspace.ok(&["plugins"]);
    assert_mentions(&plugins, &["/out=", "config:footer(value)"]);
    assert!(
        !plugins.contains("served by beehive"),
        "a config value was shown: {plugins}"
    );

    workspace.apply(
        "home.yaml",
        "kind: Page.example.dev\nname: home\nspec: {title: Welcome, body: Hello}\n",
    );
    workspace.ok(&["wait", "Page", "home", "--for", "settled"]);
    let stored = workspace.ok(&["get", "Page", "home", "-o", "json"]);
    assert!(
        stored.contains("example.dev/rendered-file"),
        "the plugin's first pass added its finalizer: {stored}"
    );
    let page = std::fs::read_to_string(out.join("home.html")).unwrap();
    assert_eq!(
        page,
        "<h1>Welcome</h1>\n<p>Hello</p>\n<footer>served by beehive</footer>\n"
    );

    workspace.ok(&["delete", "Page", "home"]);
    workspace.ok(&["wait", "Page", "home", "--for", "delete"]);
    assert!(
        !out.join("home.html").exists(),
        "the finalizer removed the file"
    );
    host.terminate();
}

#[test]
fn a_health_checker_reaches_granted_endpoints_only_and_keeps_its_token_secret() {
    let workspace = Workspace::new();
    let endpoint = beehive_e2e::TestServer::healthy();
    workspace.write("probe-token", "tok-5ecret-42\n");
    workspace.install_granted(
        "events",
        &format!(
            "[http]\nallow = [{:?}]\n\n[config]\ntoken = {{ file = {:?} }}\n",
            endpoint.authority(),
            workspace.path().join("probe-token").display().to_string()
        ),
    );
    let host = workspace.start_host(&[]);
    let connection = |name: &str, url: &str| {
        format!(
            "kind: Connection.example.dev\nname: {name}\nspec: {{url: \"{url}\", probe_interval_ms: 200}}\n"
        )
    };
    workspace.apply(
        "connections.yaml",
        &format!(
            "{}---\n{}",
            connection("db", &endpoint.url("/health")),
            connection("rogue", &endpoint.localhost_url("/health"))
        ),
    );
    workspace.ok(&["wait", "Connection", "db", "--for", "condition=Connected"]);
    assert_eq!(
        endpoint.last_header("/health", "authorization").as_deref(),
        Some("Bearer tok-5ecret-42"),
        "the token reached the endpoint"
    );
    beehive_e2e::wait_until("the rogue probe was denied", || {
        workspace
            .ok(&["events", "Connection", "rogue"])
            .contains("HttpRequestDenied")
    });
    let denied = workspace.ok(&["events", "Connection", "rogue"]);
    assert!(
        denied.contains(&endpoint.localhost_url("")),
        "the event names the destination: {denied}"
    );
    assert_mentions(&denied, &["denied by the plugin's policy"]);

    let plugins = workspace.ok(&["plugins"]);
    assert!(
        plugins.contains(&format!("http:{}", endpoint.authority())),
        "{plugins}"
    );
    assert_mentions(&plugins, &["config:token(file:"]);
    let listed: serde_json::Value =
        serde_json::from_str(&workspace.ok(&["plugins", "-o", "json"])).unwrap();
    let http = &listed["plugins"][0]["limits"]["http"];
    assert_eq!(http["max_response_bytes"], 4 << 20, "{listed}");
    assert_eq!(http["connect_timeout_ms"], 5000, "{listed}");
    let seen = [
        plugins,
        workspace.ok(&["plugins", "-o", "json"]),
        workspace.ok(&["events", "Connection", "db"]),
        workspace.ok(&["describe", "Connection", "db"]),
        workspace.ok(&["get", "Connection", "db", "-o", "json"]),
        host.log(),
    ];
    for text in seen {
        assert!(!text.contains("5ecret"), "the secret was shown: {text}");
    }
    host.terminate();
}

/// A kind no plugin serves and no object has is taken for a typo: the
/// apply is refused with exit code 3, names the kinds that exist and writes
/// nothing of the file; `--new-kind` creates such a kind on purpose.
#[test]
fn apply_refuses_a_kind_nothing_knows_unless_told_it_is_new() {
    let workspace = Workspace::new();
    workspace.write("first.yaml", "kind: Note\nname: a\n");
    let refused = workspace.run(&["apply", "-f", "first.yaml"]);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["unknown kind Note", "there are no kinds yet", "--new-kind"],
    );
    workspace.ok(&["apply", "-f", "first.yaml", "--new-kind"]);

    let typo = "kind: Note\nname: b\n---\nkind: Nte\nname: c\n";
    let error = workspace.apply_fails("typo.yaml", typo);
    assert_mentions(&error, &["unknown kind Nte", "known kinds: Note"]);
    assert_eq!(
        workspace.ok(&["get", "Note", "-o", "name"]),
        "Note/a\n",
        "nothing of the refused file was applied"
    );
}

#[test]
fn exit_codes_say_what_failed_with_or_without_a_host() {
    let workspace = Workspace::new();
    workspace.apply_new_kind("note.yaml", "kind: Note\nname: a\nspec: {x: 1}\n");
    // `line` is the command line after `beehive`, split on spaces.
    let code = |line: &str| {
        let args: Vec<&str> = line.split_whitespace().collect();
        workspace.run(&args).status.code()
    };
    // Without a host: the commands open the database themselves.
    assert_eq!(code("get Note missing"), Some(3), "not found");
    assert_eq!(code("get Nope"), Some(3), "unknown kind");
    assert_eq!(code("requeue Note a"), Some(6), "needs a host");
    assert_eq!(
        code("wait Note a --for settled --timeout 100ms"),
        Some(5),
        "timed out"
    );
    assert_eq!(code("get --bogus"), Some(2), "usage");
    workspace.write("broken.yaml", "kind: Note\nname: [unclosed\n");
    assert_eq!(
        code("apply -f broken.yaml"),
        Some(1),
        "a failure of any other kind"
    );
    // Several names: each is tried, and the one missing sets the code.
    workspace.apply(
        "more.yaml",
        "kind: Note\nname: b\n---\nkind: Note\nname: c\n",
    );
    let several = workspace.run(&["delete", "Note", "b", "missing", "c"]);
    assert_eq!(several.status.code(), Some(3), "not found");
    assert_mentions(
        &String::from_utf8_lossy(&several.stdout),
        &["Note/b marked for deletion", "Note/c marked for deletion"],
    );
    assert_mentions(
        &String::from_utf8_lossy(&several.stderr),
        &["not found: Note/missing", "1 of 3 objects not deleted"],
    );
    // With one: the code travels over the socket.
    let host = workspace.start_host(&[]);
    assert_eq!(code("get Note missing"), Some(3));
    assert_eq!(
        code("wait Note a --for condition=Ready --timeout 100ms"),
        Some(5)
    );
    // The message names the timeout asked for, not what the host had left.
    let timed_out = workspace.run(&["wait", "Note", "a", "--for", "settled", "--timeout", "2s"]);
    assert_mentions(
        &String::from_utf8_lossy(&timed_out.stderr),
        &["timed out after 2s waiting until Note/a is settled"],
    );
    workspace.write("held.yaml", "kind: Note\nname: a\nspec: {x: 2}\n");
    assert_eq!(code("apply -f held.yaml"), Some(0));
    workspace.write(
        "orphan.yaml",
        "kind: Note\nname: o\nspec: {}\nowner: Note/nope\n",
    );
    assert_eq!(
        code("apply -f orphan.yaml"),
        Some(3),
        "the owner is not found"
    );
    assert_eq!(code("run"), Some(4), "a second host on the same store");
    assert_eq!(code("logs Note missing"), Some(3), "as every other command");
    assert_eq!(code("logs Note a"), Some(0));
    host.terminate();
    // Every code is listed in the help, 7 (invalid) included.
    let help = workspace.ok(&["--help"]);
    for code in 0..=7 {
        assert!(help.contains(&format!("{code} ")), "{code}: {help}");
    }
    assert_mentions(&help, &["7 invalid"]);
}

#[test]
fn an_operator_removes_a_finalizer_nothing_will_clear() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    // `example.dev/hold` belongs to no controller: nothing will ever clear it.
    let held = "kind: GreetingSet.example.dev\nname: held\nspec: {names: []}\n\
                finalizers: [example.dev/greetings, example.dev/hold]\n";
    workspace.apply("held.yaml", held);
    workspace.ok(&["wait", "GreetingSet", "held", "--for", "condition=Ready"]);
    workspace.ok(&["delete", "GreetingSet", "held"]);
    wait_until("cascade has cleared its own finalizer", || {
        let set = json(&workspace.ok(&["get", "GreetingSet", "held", "-o", "json"]));
        set["finalizers"] == serde_json::json!(["example.dev/hold"])
    });
    // The default table says it is going.
    assert_mentions(&workspace.ok(&["get", "GreetingSet"]), &["Deleting"]);

    let wrong = workspace.run(&[
        "finalize",
        "GreetingSet",
        "held",
        "--remove",
        "example.dev/nope",
    ]);
    assert_eq!(wrong.status.code(), Some(3), "not found");
    assert_mentions(
        &String::from_utf8_lossy(&wrong.stderr),
        &["has no finalizer example.dev/nope (it has: example.dev/hold)"],
    );
    let removed = workspace.ok(&[
        "finalize",
        "GreetingSet",
        "held",
        "--remove",
        "example.dev/hold",
    ]);
    assert_mentions(
        &removed,
        &["finalizer example.dev/hold removed, its cleanup skipped"],
    );
    workspace.ok(&["wait", "GreetingSet", "held", "--for", "delete"]);
    host.terminate();
}

#[test]
fn delete_takes_the_file_that_applied_the_objects() {
    let workspace = Workspace::new();
    let notes = "kind: Note\nname: a\nspec: {}\n---\nkind: Note\nname: b\nspec: {}\n";
    workspace.apply_new_kind("notes.yaml", notes);
    workspace.apply_new_kind("keep.yaml", "kind: Note\nname: keep\nspec: {}\n");
    let deleted = workspace.ok(&["delete", "-f", "notes.yaml"]);
    assert_mentions(
        &deleted,
        &["Note/a marked for deletion", "Note/b marked for deletion"],
    );
    // Without a host nothing collects them; both are marked, keep is not.
    let listed = json(&workspace.ok(&["get", "Note", "-o", "json"]));
    let marked: Vec<bool> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.get("deletionRequestedAt").is_some_and(|at| !at.is_null()))
        .collect();
    assert_eq!(marked, [true, true, false], "{listed}");

    // A name and -f together is a usage mistake; a missing file is refused.
    let both = workspace.run(&["delete", "Note", "keep", "-f", "notes.yaml"]);
    assert_eq!(both.status.code(), Some(2), "{both:?}");
    let missing = workspace.run(&["delete", "-f", "nowhere.yaml"]);
    assert!(!missing.status.success());
    assert_mentions(&String::from_utf8_lossy(&missing.stderr), &["nowhere.yaml"]);
}

#[test]
fn json_lines_apply_from_a_jsonl_file_or_one_with_no_extension() {
    let workspace = Workspace::new();
    let lines = |a: &str, b: &str| {
        format!(
            "{{\"kind\":\"Note\",\"name\":\"{a}\",\"spec\":{{}}}}\n\
             {{\"kind\":\"Note\",\"name\":\"{b}\",\"spec\":{{}}}}\n"
        )
    };
    workspace.apply_new_kind("notes.jsonl", &lines("a", "b"));
    workspace.apply_new_kind("notes", &lines("c", "d"));
    // A directory takes .jsonl files too.
    workspace.write("dir/more.jsonl", &lines("e", "f"));
    workspace.ok(&["apply", "-f", "dir"]);
    assert_eq!(
        workspace.ok(&["get", "Note", "-o", "name"]),
        "Note/a\nNote/b\nNote/c\nNote/d\nNote/e\nNote/f\n"
    );
}

/// One apply is one commit: here a megabyte of specs, far past what one
/// write to the database's log may carry (the platform keeps 17 bits of a
/// write's length; a longer one failed as "disk full").
#[test]
fn an_apply_of_a_megabyte_lands_whole() {
    let workspace = Workspace::new();
    let filler = "x".repeat(4096);
    let manifests: String = (0..256)
        .map(|i| {
            format!("{{\"kind\":\"Note\",\"name\":\"n{i}\",\"spec\":{{\"text\":\"{filler}\"}}}}\n")
        })
        .collect();
    assert!(manifests.len() > 1 << 20);
    workspace.apply_new_kind("big.jsonl", &manifests);
    let notes = json(&workspace.ok(&["get", "Note", "-o", "json"]));
    let notes = notes.as_array().unwrap();
    assert_eq!(notes.len(), 256);
    assert!(notes.iter().all(|n| n["spec"]["text"] == filler.as_str()));
}

#[test]
fn a_reapply_that_would_change_the_owner_or_add_a_finalizer_is_refused() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply("team.yaml", TEAM);
    workspace.ok(&["wait", "Greeting", "team-ada", "--for", "settled"]);
    let code_and_error = |file: &str, text: &str| {
        workspace.write(file, text);
        let out = workspace.run(&["apply", "-f", file]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // What `get` prints names the owner and applies back, one object or a
    // list; leaving finalizers out changes nothing.
    let ada = workspace.ok(&["get", "Greeting", "team-ada", "-o", "yaml"]);
    assert_mentions(&ada, &["owner: GreetingSet.example.dev/team"]);
    assert_mentions(&workspace.apply("ada.yaml", &ada), &["unchanged"]);
    let listed = json(&workspace.ok(&["get", "Greeting", "-o", "json"]));
    assert_eq!(listed[1]["owner"], "GreetingSet.example.dev/team");
    let all = workspace.ok(&["get", "Greeting", "-o", "yaml"]);
    let reapplied = workspace.apply("all.yaml", &all);
    assert_eq!(reapplied.matches("unchanged").count(), 2, "{reapplied}");
    let no_finalizers = "kind: GreetingSet.example.dev\nname: team\nspec: {names: [ada, grace]}\n";
    assert_mentions(
        &workspace.apply("team2.yaml", no_finalizers),
        &["unchanged"],
    );

    let (code, error) = code_and_error(
        "more.yaml",
        &format!("{no_finalizers}finalizers: [example.dev/greetings, example.dev/extra]\n"),
    );
    assert_eq!(code, Some(4), "{error}");
    assert_mentions(
        &error,
        &["finalizers are set only at creation: example.dev/extra is not on the stored object"],
    );

    workspace.apply(
        "other.yaml",
        "kind: GreetingSet.example.dev\nname: other\nspec: {names: []}\n",
    );
    let (code, error) = code_and_error(
        "moved.yaml",
        "kind: Greeting.example.dev\nname: team-ada\nspec: {name: ada}\nowner: GreetingSet/other\n",
    );
    assert_eq!(code, Some(4), "{error}");
    assert_mentions(
        &error,
        &["the owner is set only at creation (it has GreetingSet.example.dev/team)"],
    );
    host.terminate();
}

#[test]
fn objects_are_addressed_as_get_prints_them_and_kinds_in_any_case() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply("team.yaml", TEAM);
    workspace.ok(&["wait", "greeting/team-ada", "--for", "settled"]);
    workspace.ok(&["wait", "Greeting", "team-grace", "--for", "settled"]);

    let names = workspace.ok(&["get", "Greeting", "-o", "name"]);
    let listed: Vec<&str> = names.lines().collect();
    assert_eq!(
        listed,
        [
            "Greeting.example.dev/team-ada",
            "Greeting.example.dev/team-grace"
        ]
    );
    // What `-o name` prints is an address every command takes.
    let ada = json(&workspace.ok(&["get", listed[0], "-o", "json"]));
    assert_eq!(ada["name"], "team-ada");
    assert_mentions(&workspace.ok(&["describe", listed[1]]), &["team-grace"]);
    workspace.ok(&["events", listed[0]]);
    // Several names, and kinds in any case or plural.
    let both = workspace.ok(&["get", "greetings", "team-ada", "team-grace", "-o", "name"]);
    assert_eq!(both, names);
    let again = workspace.ok(&["get", "GREETING.example.dev", "team-ada", "-o", "name"]);
    assert_eq!(again, "Greeting.example.dev/team-ada\n");
    let refused = workspace.run(&["get", "Greeting/team-ada", "GreetingSet/team"]);
    assert_eq!(refused.status.code(), Some(2), "one kind per command");

    let mut args = vec!["delete"];
    args.extend(listed.iter().copied());
    assert_mentions(
        &workspace.ok(&args),
        &[
            "team-ada marked for deletion",
            "team-grace marked for deletion",
        ],
    );
    host.terminate();
}

/// The nesting limit holds for a spec however it arrives (a manifest whose
/// plain values hold quotes, the socket), and brackets in a plain value are
/// text: both failed on a8199a6.
#[test]
fn a_spec_nested_past_the_limit_is_refused_however_it_arrives() {
    let workspace = Workspace::new();
    let lists = |levels: usize| format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
    // The spec's mapping and 99 levels of lists: 100 in all.
    let hidden = format!(
        "kind: Note\nname: deep\nspec:\n  note: it's\n  a: {}\n",
        lists(99)
    );
    workspace.write("deep.yaml", &hidden);
    let refused = workspace.run(&["apply", "-f", "deep.yaml", "--new-kind"]);
    assert!(!refused.status.success(), "{refused:?}");
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["deep.yaml: nested deeper than 64 levels"],
    );
    // Just past the limit, the parsed spec is what is measured.
    workspace.write(
        "deeper.yaml",
        &format!(
            "kind: Note\nname: deep\nspec:\n  note: it's\n  a: {}\n",
            lists(64)
        ),
    );
    let refused = workspace.run(&["apply", "-f", "deeper.yaml", "--new-kind"]);
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["the spec is nested 65 levels deep; at most 64"],
    );
    workspace.apply_new_kind(
        "brackets.yaml",
        &format!("kind: Note\nname: text\nspec:\n  x: a{}\n", "[".repeat(65)),
    );
    let stored = workspace.ok(&["get", "Note", "-o", "name"]);
    assert_eq!(stored, "Note/text\n", "the deep one was not written");

    // Over the socket, past the CLI's own check: the store refuses it.
    let host = workspace.start_host(&[]);
    let request = format!(
        "{{\"op\":\"apply\",\"args\":{{\"new_kinds\":true,\"objects\":[{{\"kind\":\"Note\",\"name\":\"raw\",\"spec\":{{\"a\":{}}}}}]}}}}\n",
        lists(64)
    );
    let socket = workspace.path().join("beehive.db.sock");
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut reply = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut reply).unwrap();
    assert_mentions(&reply, &["nested 65 levels deep; at most 64"]);
    assert_eq!(workspace.ok(&["get", "Note", "-o", "name"]), "Note/text\n");
    host.terminate();
}

/// A float keeps every digit through the store and `get`, so what `get`
/// prints applies back unchanged (found by the output fuzz target: the
/// last digit moved).
#[test]
fn a_float_applies_back_unchanged() {
    let workspace = Workspace::new();
    workspace.apply_new_kind(
        "float.yaml",
        "kind: Note\nname: f\nspec: {x: -952284.1064813145}\n",
    );
    let printed = workspace.ok(&["get", "Note", "f", "-o", "json"]);
    assert_mentions(&printed, &["-952284.1064813145"]);
    workspace.write("again.json", &printed);
    assert_mentions(
        &workspace.ok(&["apply", "-f", "again.json"]),
        &["unchanged"],
    );
}

/// A reader that stops early (`beehive ... | head`) ends the command
/// quietly with success, as for any Unix filter: no panic, no backtrace.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let mut child = std::process::Command::new(beehive_e2e::beehive_bin())
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("beehive starts");
    // The read end closes before the command writes a byte.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("beehive ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn patch_merges_or_applies_json_patches_validated_like_any_write() {
    let workspace = Workspace::with_plugins(&["conditions"]);
    let host = workspace.start_host(&[
        "--plugin-cache",
        beehive_e2e::shared_plugin_cache().to_str().unwrap(),
    ]);
    workspace.apply(
        "web.yaml",
        "kind: Service\nname: web\nspec: {port: 8080, enabled: false}\n",
    );
    let port = |w: &Workspace| w.ok(&["get", "Service/web", "-o", "jsonpath={.spec.port}"]);

    let merged = workspace.ok(&["patch", "Service/web", "-p", r#"{"spec":{"port":9090}}"#]);
    assert_eq!(merged, "Service.example.dev/web patched\n");
    assert_eq!(port(&workspace), "9090");
    let kept = workspace.ok(&["get", "Service/web", "-o", "jsonpath={.spec.enabled}"]);
    assert_eq!(kept, "false", "a merge patch leaves other fields");
    let again = workspace.ok(&["patch", "Service", "web", "-p", r#"{"spec":{"port":9090}}"#]);
    assert_eq!(again, "Service.example.dev/web unchanged\n");

    let json_patch = r#"[{"op":"test","path":"/spec/port","value":9090},{"op":"replace","path":"/spec/port","value":7070}]"#;
    workspace.ok(&["patch", "Service/web", "--type", "json", "-p", json_patch]);
    assert_eq!(port(&workspace), "7070");

    // Refused, each with why; the spec stays as it was.
    let out_of_range = workspace.run(&["patch", "Service/web", "-p", r#"{"spec":{"port":70000}}"#]);
    assert_eq!(out_of_range.status.code(), Some(7), "{out_of_range:?}");
    assert_mentions(
        &String::from_utf8_lossy(&out_of_range.stderr),
        &["spec.port: 70000 is outside 1-65535"],
    );
    let failed_test = workspace.run(&[
        "patch",
        "Service/web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"test","path":"/spec/port","value":1}]"#,
    ]);
    assert_eq!(failed_test.status.code(), Some(7), "{failed_test:?}");
    assert_mentions(
        &String::from_utf8_lossy(&failed_test.stderr),
        &["operation 1: test /spec/port"],
    );
    let beyond = workspace.run(&["patch", "Service/web", "-p", r#"{"name":"other"}"#]);
    assert_mentions(
        &String::from_utf8_lossy(&beyond.stderr),
        &["a patch changes the spec only, not name"],
    );
    let not_json = workspace.run(&["patch", "Service/web", "-p", "{port: 1}"]);
    assert_eq!(not_json.status.code(), Some(2), "{not_json:?}");
    let missing = workspace.run(&["patch", "Service/nope", "-p", "{}"]);
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    assert_eq!(port(&workspace), "7070");
    host.terminate();
}

#[test]
fn edit_writes_the_saved_spec_reopens_on_a_refusal_and_never_overwrites_a_change() {
    let workspace = Workspace::with_plugins(&["conditions"]);
    let cache = beehive_e2e::shared_plugin_cache();
    let host = workspace.start_host(&["--plugin-cache", cache.to_str().unwrap()]);
    workspace.apply("web.yaml", "kind: Service\nname: web\nspec: {port: 8080}\n");
    let port = || workspace.ok(&["get", "Service/web", "-o", "jsonpath={.spec.port}"]);
    let edit = |editor: &str| {
        let env = [("EDITOR", editor), ("VISUAL", editor)];
        let out = workspace.run_with(&["edit", "Service/web"], &env);
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), said)
    };

    // A refused edit is kept in a file the message names: removed here.
    let kept = |said: &str| {
        let path = said
            .split("your edit is kept in ")
            .nth(1)
            .expect("the message names the kept edit")
            .trim();
        std::fs::remove_file(path).expect("the kept edit is there");
    };

    let (code, said) = edit("sed -i s/8080/9090/");
    assert_eq!(
        (code, said.as_str()),
        (Some(0), "Service.example.dev/web edited\n")
    );
    assert_eq!(port(), "9090");
    let (code, said) = edit("true");
    assert_eq!(
        (code, said.as_str()),
        (Some(0), "Edit cancelled, no changes made.\n")
    );

    // A refused spec reopens with the error on top; the fix is written.
    workspace.write(
        "fix.sh",
        "if grep -q '^# error: ' \"$1\"; then cp \"$1\" seen.yaml; sed -i s/70000/9191/ \"$1\"; \
         else sed -i s/9090/70000/ \"$1\"; fi\n",
    );
    let (code, said) = edit("sh fix.sh");
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(port(), "9191");
    let seen = std::fs::read_to_string(workspace.path().join("seen.yaml")).unwrap();
    assert_mentions(
        &seen,
        &[
            "# error: ",
            "70000 is outside 1-65535",
            "kind: Service.example.dev",
        ],
    );

    // Saved unchanged after the refusal: it gives up, and keeps the edit.
    let (code, said) = edit("sed -i 's/port: [0-9]*/port: 70000/'");
    assert_eq!(code, Some(7), "{said}");
    assert_mentions(&said, &["70000 is outside", "your edit is kept in"]);
    kept(&said);
    assert_eq!(port(), "9191");

    // Another write to the spec while the file is open is not overwritten.
    let beehive = beehive_e2e::beehive_bin();
    workspace.write(
        "race.sh",
        &format!(
            "{} patch Service/web -p '{{\"spec\":{{\"port\":1234}}}}' >/dev/null\n\
             sed -i s/9191/4321/ \"$1\"\n",
            beehive.display()
        ),
    );
    let (code, said) = edit("sh race.sh");
    assert_eq!(code, Some(4), "{said}");
    assert_mentions(
        &said,
        &["changed while it was being edited", "nothing was written"],
    );
    kept(&said);
    assert_eq!(port(), "1234");

    // An editor that keeps saving something refused is given up on.
    workspace.write(
        "stubborn.sh",
        "echo '# again' >> \"$1\"; sed -i 's/port: [0-9]*/port: 70000/' \"$1\"\n",
    );
    let (code, said) = edit("sh stubborn.sh");
    assert_eq!(code, Some(7), "{said}");
    assert_mentions(&said, &["refused 11 times: giving up"]);
    kept(&said);

    // Fixed fields stay fixed.
    let (code, said) = edit("sed -i 's/^name: web/name: other/'");
    assert_eq!(code, Some(7), "{said}");
    assert_mentions(&said, &["kind and name are fixed"]);
    kept(&said);
    host.terminate();
}

#[test]
fn labels_round_trip_and_selectors_pick_the_objects_that_carry_them() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply(
        "greetings.yaml",
        "kind: Greeting.example.dev\nname: a\nlabels: {tier: web, env: prod}\nspec: {name: A}\n---\n\
         kind: Greeting.example.dev\nname: b\nlabels: {tier: db}\nspec: {name: B}\n---\n\
         kind: Greeting.example.dev\nname: c\nspec: {name: C}\n",
    );
    let picked = |selector: &str| {
        workspace
            .ok(&["get", "Greeting", "-l", selector, "-o", "name"])
            .lines()
            .map(|line| line.rsplit('/').next().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(picked("tier=web"), "a");
    assert_eq!(picked("tier==db"), "b");
    assert_eq!(picked("tier!=web"), "b,c");
    assert_eq!(picked("tier in (web, db)"), "a,b");
    assert_eq!(picked("tier notin (db)"), "a,c");
    assert_eq!(picked("env"), "a");
    assert_eq!(picked("!tier"), "c");
    assert_eq!(picked("tier,env=prod"), "a");
    assert_eq!(picked("tier=cache"), "");

    let table = workspace.ok(&["get", "Greeting", "--show-labels"]);
    assert_mentions(&table, &["LABELS", "env=prod,tier=web", "<none>"]);
    assert_mentions(
        &workspace.ok(&["describe", "Greeting", "a"]),
        &["Labels:", "env=prod,tier=web"],
    );
    // What get prints applies back unchanged, labels included.
    let printed = workspace.ok(&["get", "Greeting", "a", "-o", "yaml"]);
    assert_mentions(&printed, &["labels:", "tier: web"]);
    workspace.write("a.yaml", &printed);
    assert_mentions(&workspace.ok(&["apply", "-f", "a.yaml"]), &["unchanged"]);

    // Labelling is a write of its own: a new resource version, the same
    // generation; a value it has changes only with --overwrite.
    let before = json(&workspace.ok(&["get", "Greeting", "c", "-o", "json"]));
    assert_mentions(
        &workspace.ok(&["label", "Greeting/c", "tier=cache", "team=x"]),
        &["labeled"],
    );
    let after = json(&workspace.ok(&["get", "Greeting", "c", "-o", "json"]));
    assert_eq!(after["generation"], before["generation"]);
    assert!(after["resourceVersion"].as_i64() > before["resourceVersion"].as_i64());
    assert_eq!(after["labels"]["tier"], "cache");
    let refused = workspace.fails(&["label", "Greeting", "c", "tier=web"]);
    assert_mentions(&refused, &["already has the value", "--overwrite"]);
    workspace.ok(&["label", "Greeting", "c", "tier=web", "--overwrite", "team-"]);
    assert_eq!(picked("tier=web"), "a,c");
    assert_eq!(picked("team"), "");
    // A manifest without labels leaves them; the plugin's passes keep them.
    workspace.apply(
        "c.yaml",
        "kind: Greeting.example.dev\nname: c\nspec: {name: Cee}\n",
    );
    workspace.ok(&[
        "wait",
        "Greeting",
        "c",
        "--for",
        "jsonpath={.status.message}=Hello, Cee!",
    ]);
    assert_eq!(picked("tier=web"), "a,c");

    // Bad input: the position, usage's exit code, nothing written.
    let output = workspace.run(&["get", "Greeting", "-l", "tier in web"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_mentions(
        &String::from_utf8_lossy(&output.stderr),
        &["position 8", "'('"],
    );
    let bad = workspace.apply_fails(
        "bad.yaml",
        "kind: Greeting.example.dev\nname: d\nlabels: {-x: y}\nspec: {name: D}\n",
    );
    assert_mentions(&bad, &["label key", "-x"]);
    let bad = workspace.fails(&["label", "Greeting", "a", "Bad/key=1"]);
    assert_mentions(&bad, &["prefix"]);

    // wait -l waits on each object the selector picks.
    let waited = workspace.ok(&["wait", "Greeting", "-l", "tier=web", "--for", "settled"]);
    assert_mentions(&waited, &["Greeting/a", "Greeting/c"]);
    assert!(!waited.contains("Greeting/b"), "{waited}");
    // get -w -l follows the objects that match, and one that stops matching.
    let mut watch = workspace.follow(&["get", "Greeting", "-w", "-l", "tier=db", "-o", "json"]);
    let first = json(&watch.next_line());
    assert_eq!(first["object"]["name"], "b", "{first}");
    workspace.ok(&["label", "Greeting", "a", "tier=db", "--overwrite"]);
    let next = json(&watch.next_line());
    assert_eq!(next["object"]["name"], "a", "a now matches: {next}");
    workspace.ok(&["label", "Greeting", "c", "note=x"]);
    workspace.ok(&["label", "Greeting", "a", "tier=web", "--overwrite"]);
    let last = json(&watch.next_line());
    assert_eq!(
        (
            last["object"]["name"].as_str(),
            last["object"]["labels"]["tier"].as_str()
        ),
        (Some("a"), Some("web")),
        "a leaving the selection is shown; c, which never matched, is not: {last}"
    );
    drop(watch);

    // delete -l takes exactly the matching objects.
    assert_mentions(
        &workspace.ok(&["delete", "Greeting", "-l", "tier=db"]),
        &["b"],
    );
    workspace.ok(&["wait", "Greeting", "b", "--for", "delete"]);
    assert_eq!(picked("tier"), "a,c");
    host.terminate();
}

/// Every form of kubectl's selector grammar, with what it picks of `a`
/// (tier=web, env=prod), `b` (tier=db) and `c` (no labels).
const SELECTOR_FORMS: [(&str, &str); 7] = [
    ("tier=web", "a"),
    ("tier==db", "b"),
    ("tier!=web", "b,c"),
    ("tier in (web, db)", "a,b"),
    ("tier notin (db)", "a,c"),
    ("env", "a"),
    ("!tier", "c"),
];

const LABELLED: &str = "kind: Greeting.example.dev\nname: a\nlabels: {tier: web, env: prod}\nspec: {name: A}\n---\n\
     kind: Greeting.example.dev\nname: b\nlabels: {tier: db}\nspec: {name: B}\n---\n\
     kind: Greeting.example.dev\nname: c\nspec: {name: C}\n";

/// The names among `lines` (`Greeting/x …`, `…/x`), sorted and joined.
fn names_in(lines: &str) -> String {
    let mut names: Vec<String> = lines
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(|word| {
            let name = word.rsplit('/').next().unwrap();
            name.trim_end_matches(':').to_string()
        })
        .collect();
    names.sort();
    names.join(",")
}

#[test]
fn every_selector_form_picks_the_same_objects_on_wait_get_w_and_delete() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    workspace.apply("labelled.yaml", LABELLED);
    for (selector, picked) in SELECTOR_FORMS {
        let waited = workspace.ok(&["wait", "Greeting", "-l", selector, "--for", "settled"]);
        assert_eq!(names_in(&waited), picked, "wait -l {selector:?}: {waited}");

        let mut watch = workspace.follow(&["get", "Greeting", "-w", "-l", selector, "-o", "json"]);
        let listed: Vec<String> = (0..picked.split(',').count())
            .map(|_| {
                json(&watch.next_line())["object"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        drop(watch);
        let mut listed = listed;
        listed.sort();
        assert_eq!(listed.join(","), picked, "get -w -l {selector:?}");
    }
    for (selector, picked) in SELECTOR_FORMS {
        workspace.ok(&["delete", "Greeting", "-l", selector]);
        for name in picked.split(',') {
            workspace.ok(&["wait", "Greeting", name, "--for", "delete"]);
        }
        let left = names_in(&workspace.ok(&["get", "Greeting", "-o", "name"]));
        let expected: Vec<&str> = ["a", "b", "c"]
            .into_iter()
            .filter(|name| !picked.split(',').any(|p| p == *name))
            .collect();
        assert_eq!(left, expected.join(","), "delete -l {selector:?}");
        workspace.apply("labelled.yaml", LABELLED);
    }
    host.terminate();
}

#[test]
fn apply_dry_run_writes_nothing_and_diff_says_what_would_change() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    let first = "kind: Greeting.example.dev\nname: a\nlabels: {tier: web}\nspec: {name: A}\n";
    workspace.write("a.yaml", first);
    // A dry run checks and reports, and writes nothing.
    assert_eq!(
        workspace.ok(&["apply", "-f", "a.yaml", "--dry-run"]),
        "Greeting.example.dev/a created (server dry run)\n"
    );
    let none = workspace.run(&["get", "Greeting", "a"]);
    assert_eq!(none.status.code(), Some(3), "nothing was written: {none:?}");
    // It fails as the apply would, with the same exit code.
    workspace.write(
        "bad.yaml",
        "kind: Greeting.example.dev\nname: b\nspec: {name: 5}\n",
    );
    let bad = workspace.run(&["apply", "-f", "bad.yaml", "--dry-run=server"]);
    assert_eq!(bad.status.code(), Some(7), "{bad:?}");

    // diff: an object to create is all additions, exit 1.
    let output = workspace.run(&["diff", "-f", "a.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert_mentions(
        &shown,
        &[
            "--- live/Greeting.example.dev/a",
            "+++ merged/Greeting.example.dev/a",
            "+spec:",
            "+  name: A",
        ],
    );
    assert!(output.stderr.is_empty(), "no error line: {output:?}");
    workspace.ok(&["apply", "-f", "a.yaml"]);
    // Applied, nothing would change: exit 0, nothing printed.
    assert_eq!(workspace.ok(&["diff", "-f", "a.yaml"]), "");
    // A changed spec and label show as lines removed and added.
    workspace.write(
        "a2.yaml",
        "kind: Greeting.example.dev\nname: a\nlabels: {tier: db}\nspec: {name: Ada}\n",
    );
    let output = workspace.run(&["diff", "-f", "a2.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert_mentions(
        &shown,
        &["-  tier: web", "+  tier: db", "-  name: A", "+  name: Ada"],
    );
    let kept = json(&workspace.ok(&["get", "Greeting", "a", "-o", "json"]));
    assert_eq!(kept["spec"]["name"], "A", "diff wrote nothing");
    host.terminate();
}

#[test]
fn a_kubernetes_shaped_manifest_applies_and_prints_back_in_its_shape() {
    let workspace = with_plugins();
    let host = workspace.start_host(&[]);
    let applied = workspace.apply(
        "k8s.yaml",
        "apiVersion: example.dev/v1\nkind: Greeting\nmetadata:\n  name: ada\n  labels: {tier: web}\nspec:\n  name: Ada\n",
    );
    assert_eq!(applied, "Greeting.example.dev/ada created\n");
    workspace.ok(&["wait", "Greeting", "ada", "--for", "settled"]);
    let printed = workspace.ok(&["get", "Greeting", "ada", "--kubernetes", "-o", "yaml"]);
    assert_mentions(
        &printed,
        &[
            "apiVersion: example.dev/v1",
            "kind: Greeting",
            "metadata:",
            "uid:",
            "tier: web",
            "status:",
        ],
    );
    workspace.write("printed.yaml", &printed);
    assert_mentions(
        &workspace.ok(&["apply", "-f", "printed.yaml"]),
        &["unchanged"],
    );
    let refused = workspace.apply_fails(
        "annotated.yaml",
        "apiVersion: example.dev/v1\nkind: Greeting\nmetadata:\n  name: b\n  annotations: {a: b}\nspec:\n  name: B\n",
    );
    assert_mentions(&refused, &["metadata.annotations is not read"]);
    host.terminate();
}
