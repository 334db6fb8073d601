//! `beehive run --web-addr`: the console, read over HTTP as a browser
//! reads it, against a real host and plugin.

use std::io::{Read, Write};

use beehive_e2e::{HostProcess, Workspace, assert_mentions, http_get, wait_until};

/// Where the host says its console is.
fn console_address(host: &HostProcess) -> String {
    let mut address = None;
    wait_until("the host says where its console is", || {
        address = host.log().lines().find_map(|line| {
            let (_, rest) = line.split_once("serving the console on http://")?;
            Some(rest.trim().trim_end_matches('/').to_string())
        });
        address.is_some()
    });
    address.unwrap()
}

/// One GET of `path` with `headers`: the head and the body.
fn get_with(address: &str, path: &str, headers: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("the console is reached");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {address}\r\n{headers}connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a head");
    (head.to_string(), body.to_string())
}

#[test]
fn the_console_shows_kinds_and_objects_and_what_a_plugin_wrote_only_as_text() {
    let workspace = Workspace::with_plugins(&["greeting", "misbehave"]);
    workspace.write("plugins/broken.wasm", "not a component <b>");
    let host = workspace.start_host(&["--web-addr", "0"]);
    let address = console_address(&host);
    assert!(
        address.starts_with("127.0.0.1:"),
        "a bare port is loopback: {address}"
    );
    // The greeting plugin writes the spec's name into its status: a
    // manifest's hostile text comes back as a plugin's.
    workspace.apply(
        "greetings.yaml",
        "kind: Greeting.example.dev\nname: plain\nspec: {name: Ada}\n---\n\
         kind: Greeting.example.dev\nname: hostile\nlabels: {tier: web}\n\
         spec: {name: \"<script>alert(1)</script>\\u202Eevil\"}\n",
    );
    for name in ["plain", "hostile"] {
        workspace.ok(&["wait", "Greeting", name, "--for", "settled"]);
    }

    let (head, first) = http_get(&address, "/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_mentions(
        &head.to_lowercase(),
        &[
            "content-security-policy: default-src 'none'",
            "x-content-type-options: nosniff",
        ],
    );
    assert_mentions(
        &first,
        &[
            "href=\"/kinds/Greeting.example.dev\"",
            "<td class=\"n\">2</td>",
            "greeting.wasm",
            "<a href=\"/plugins\">2 serving</a>, <span class=\"bad\">1 failing to load</span>",
        ],
    );
    // Each kind's plugin version: the first 12 hex digits of its digest.
    let version = first
        .split("plugins/greeting.wasm</td><td>")
        .nth(1)
        .and_then(|rest| rest.split("</td>").next())
        .unwrap_or_default();
    assert!(
        version.len() == 12 && version.bytes().all(|b| b.is_ascii_hexdigit()),
        "a version beside the plugin: {version:?}"
    );
    let (_, plugins) = http_get(&address, "/plugins");
    assert_mentions(
        &plugins,
        &[
            "<td>plugins/greeting.wasm</td>",
            "<td>0.2.0</td>",
            "MiB memory",
            "<h2>Failed to load</h2>",
            "plugins/broken.wasm",
        ],
    );
    assert!(!plugins.contains("<b>"), "{plugins}");

    let (head, page) = http_get(&address, "/objects/Greeting.example.dev/hostile");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_mentions(
        &page,
        &[
            "Hello, &lt;script&gt;alert(1)&lt;/script&gt;\\u{202e}evil!",
            "tier=web",
        ],
    );
    assert_eq!(
        page.matches("<script").count(),
        1,
        "the console's own script tag, and no markup from data: {page}"
    );
    assert!(!page.contains('\u{202e}'), "no hidden override: {page}");

    // The kind's page, and narrowed by a label selector.
    let (_, all) = http_get(&address, "/kinds/Greeting.example.dev");
    assert_mentions(&all, &[">plain<", ">hostile<", "2 shown."]);
    let (_, selected) = http_get(&address, "/kinds/Greeting.example.dev?l=tier%3Dweb");
    assert_mentions(&selected, &[">hostile<", "1 shown."]);
    assert!(!selected.contains(">plain<"), "{selected}");

    // Failing or backing off: exactly the objects whose latest pass failed,
    // with why.
    workspace.apply(
        "misbehave.yaml",
        "kind: Misbehave.test.dev\nname: boom\nspec: {act: panic}\n---\n\
         kind: Misbehave.test.dev\nname: calm\nspec: {act: behave}\n",
    );
    workspace.ok(&["wait", "Misbehave", "calm", "--for", "settled"]);
    let failing = || http_get(&address, "/kinds/Misbehave.test.dev?failing").1;
    wait_until("the failing page lists the failing object", || {
        failing().contains(">boom<")
    });
    let page = failing();
    assert_mentions(
        &page,
        &["failed ", "misbehave was asked to panic", "1 shown."],
    );
    assert!(!page.contains(">calm<"), "{page}");
    // The first screen counts it, links the filter, and shows the rates.
    wait_until("the first screen counts the failing object", || {
        http_get(&address, "/").1.contains(
            "<td class=\"n bad\"><a href=\"/kinds/Misbehave.test.dev?failing\">1</a></td>",
        )
    });
    assert_mentions(
        &http_get(&address, "/").1,
        &[
            "<th>Passes/s</th>",
            "<th>p99 pass</th>",
            " ms</td>",
            "<h2>Warnings</h2>",
            "<a href=\"/objects/Misbehave.test.dev/boom\">Misbehave.test.dev/boom</a></td><td class=\"bad\">ReconcileFailed</td>",
        ],
    );

    // The failing object's events, drawn: a row for its category, a
    // warning run in it.
    let (_, boom) = http_get(&address, "/objects/Misbehave.test.dev/boom");
    assert_mentions(
        &boom,
        &[
            "<svg class=\"timeline\"",
            "<text class=\"category\" x=\"0\" y=\"17\" font-size=\"12\">reconcile</text>",
            "<rect class=\"run warning\"",
            "ReconcileFailed ×",
        ],
    );

    let (head, missing) = http_get(&address, "/objects/Greeting.example.dev/nobody");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert_mentions(&missing, &["nobody"]);
    let (head, _) = http_get(&address, "/elsewhere");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    host.terminate();
}

#[test]
fn an_object_page_draws_its_owner_its_children_and_its_dependencies_as_links() {
    let workspace = Workspace::with_plugins(&["cascade", "greeting"]);
    let host = workspace.start_host(&["--web-addr", "0"]);
    let address = console_address(&host);
    workspace.apply(
        "team.yaml",
        "kind: GreetingSet.example.dev\nname: team\nspec: {names: [ada, grace]}\n",
    );
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    let (_, set) = http_get(&address, "/objects/GreetingSet.example.dev/team");
    assert_mentions(&set, &["<svg class=\"graph\"", "<rect class=\"self\""]);
    for child in ["team-ada", "team-grace"] {
        let link = format!("<a class=\"node\" href=\"/objects/Greeting.example.dev/{child}\">");
        // The set owns each child and depends on it: a box on each side.
        assert_eq!(set.matches(&link).count(), 2, "{child} in {set}");
    }
    let (_, child) = http_get(&address, "/objects/Greeting.example.dev/team-ada");
    assert_mentions(
        &child,
        &["<a class=\"node\" href=\"/objects/GreetingSet.example.dev/team\">"],
    );
    host.terminate();
}

#[test]
fn a_kind_page_holds_at_most_500_objects_and_links_the_next_page() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&["--web-addr", "0"]);
    let address = console_address(&host);
    let greetings: String = (0..501)
        .map(|i| format!("{{\"kind\":\"Greeting.example.dev\",\"name\":\"g{i}\",\"spec\":{{\"name\":\"n\"}}}}\n"))
        .collect();
    workspace.write("greetings.json", &greetings);
    workspace.ok(&["apply", "-f", "greetings.json"]);
    let (_, first) = http_get(&address, "/kinds/Greeting.example.dev");
    assert_eq!(first.matches("<tr><td><a href=\"/objects/").count(), 500);
    let next = first
        .split("<a href=\"")
        .find_map(|link| link.strip_suffix("\">next page</a>.</p></main></body></html>"))
        .unwrap_or_else(|| panic!("a next page link in {first}"));
    let (_, second) = http_get(&address, next);
    assert_eq!(second.matches("<tr><td><a href=\"/objects/").count(), 1);
    assert_mentions(&second, &["1 shown."]);
    assert!(!second.contains("next page"), "{second}");
    host.terminate();
}

#[test]
fn an_open_page_hears_of_an_apply_without_asking() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let host = workspace.start_host(&["--web-addr", "0"]);
    let address = console_address(&host);
    let (_, page) = http_get(&address, "/");
    assert_mentions(&page, &["<script src=\"/console.js\" defer></script>"]);
    let (head, script) = http_get(&address, "/console.js");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_mentions(&head, &["text/javascript"]);
    assert_mentions(&script, &["new EventSource(\"/live\")", "replaceWith"]);

    // What the page's script listens to: a change event when the store
    // moves, here an apply from the CLI.
    let mut live = std::net::TcpStream::connect(&address).unwrap();
    live.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    write!(live, "GET /live HTTP/1.1\r\nhost: {address}\r\n\r\n").unwrap();
    let mut heard = String::new();
    let mut read_more = |heard: &mut String| {
        let mut buffer = [0u8; 4096];
        if let Ok(read) = live.read(&mut buffer) {
            heard.push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    };
    wait_until("the stream opened", || {
        read_more(&mut heard);
        heard.contains("retry: 2000")
    });
    assert_mentions(&heard, &["HTTP/1.1 200", "text/event-stream"]);
    assert!(
        !heard.contains("event: change"),
        "nothing changed yet: {heard}"
    );
    workspace.apply(
        "greeting.yaml",
        "kind: Greeting.example.dev\nname: late\nspec: {name: Late}\n",
    );
    wait_until("the open stream told of the apply", || {
        read_more(&mut heard);
        heard.contains("event: change")
    });
    host.terminate();
}

#[test]
fn a_console_other_machines_can_reach_needs_the_operators_token() {
    let workspace = Workspace::with_plugins(&["greeting"]);
    let refused = workspace.run(&["run", "--web-addr", "0.0.0.0:0"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert_mentions(
        &String::from_utf8_lossy(&refused.stderr),
        &["reachable from other machines", "--web-token-file"],
    );
    assert!(
        !workspace.path().join("beehive.db").exists(),
        "refused before the store was created"
    );

    let token = "s3cret-token-0123456789";
    workspace.write("console.token", &format!("{token}\n"));
    let host = workspace.start_host(&[
        "--web-addr",
        "0.0.0.0:0",
        "--web-token-file",
        "console.token",
    ]);
    let port = console_address(&host)
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let address = format!("127.0.0.1:{port}");
    let (head, _) = get_with(&address, "/", "");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let (head, _) = get_with(
        &address,
        "/",
        "authorization: Bearer wrong-token-0123456789\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let (head, _) = get_with(&address, "/", &format!("authorization: Bearer {token}\r\n"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A browser: the token once in the URL, then a cookie.
    let (head, _) = get_with(
        &address,
        &format!("/kinds/Greeting.example.dev?token={token}"),
        "",
    );
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    assert_mentions(
        &head.to_lowercase(),
        &[
            "location: /kinds/greeting.example.dev",
            "httponly",
            "samesite=strict",
        ],
    );
    let (head, _) = get_with(
        &address,
        "/",
        &format!("cookie: beehive_console={token}\r\n"),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    host.terminate();
}

/// Every browser case in one host and one browser, started once: the first
/// screen's counts, an apply showing on an open page without a reload, the
/// pictures drawn, hostile text shown as text. Saves a screenshot of an
/// object's page in the target directory.
#[test]
fn in_a_browser_the_console_counts_follows_an_apply_and_draws_its_pictures() {
    let workspace = Workspace::with_plugins(&["cascade", "greeting", "misbehave"]);
    let host = workspace.start_host(&["--web-addr", "0"]);
    let address = console_address(&host);
    workspace.apply(
        "objects.yaml",
        "kind: GreetingSet.example.dev\nname: team\nspec: {names: [ada, grace]}\n---\n\
         kind: Greeting.example.dev\nname: hostile\n\
         spec: {name: \"<script>document.title='owned'</script>\"}\n---\n\
         kind: Misbehave.test.dev\nname: boom\nspec: {act: panic}\n",
    );
    workspace.ok(&["wait", "GreetingSet", "team", "--for", "condition=Ready"]);
    workspace.ok(&["wait", "Greeting", "hostile", "--for", "settled"]);
    let mut browser = crate::browser::Browser::start();

    // The first screen: each kind's objects, as the store counts them.
    browser.open(&format!("http://{address}/"));
    let objects_of = |kind: &str| {
        format!(
            "[...document.querySelectorAll('main table tr')]\
               .find(row => row.cells[0] && row.cells[0].textContent === '{kind}')\
               ?.cells[3].textContent"
        )
    };
    assert_eq!(browser.eval(&objects_of("Greeting.example.dev")), "3");
    assert_eq!(browser.eval(&objects_of("GreetingSet.example.dev")), "1");
    assert_eq!(browser.eval(&objects_of("Misbehave.test.dev")), "1");

    // An open page shows an apply from the CLI, in the same document: no
    // reload.
    browser.open(&format!("http://{address}/kinds/Greeting.example.dev"));
    browser.eval("window.openedOnce = true");
    workspace.apply(
        "late.yaml",
        "kind: Greeting.example.dev\nname: late\nspec: {name: Late}\n",
    );
    let shown_in = browser.wait_for(
        "the open page shows the applied greeting",
        "!!document.querySelector('a[href=\"/objects/Greeting.example.dev/late\"]')",
    );
    assert_eq!(
        browser.eval("window.openedOnce === true"),
        true,
        "not reloaded"
    );
    println!("an apply showed on the open page after {shown_in:?}");

    // Hostile text is text: the spec's script is shown, never run.
    browser.open(&format!(
        "http://{address}/objects/Greeting.example.dev/hostile"
    ));
    assert_eq!(
        browser.eval("document.querySelector('main').textContent.includes(\"<script>document.title='owned'</script>\")"),
        true
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('main script').length"),
        0
    );
    assert_ne!(browser.eval("document.title"), "owned");

    // The pictures: a warning run on the failing object's timeline; the
    // set's children around it, each a link.
    browser.open(&format!("http://{address}/objects/Misbehave.test.dev/boom"));
    browser.wait_for(
        "the timeline's warning run is drawn",
        "document.querySelectorAll('svg.timeline rect.run.warning').length > 0",
    );
    browser.open(&format!(
        "http://{address}/objects/GreetingSet.example.dev/team"
    ));
    assert_eq!(
        browser.eval("document.querySelectorAll('svg.graph a.node').length"),
        4,
        "two children, each owned and depended on"
    );
    assert_eq!(
        browser.eval("[...document.querySelectorAll('svg.graph a.node')].every(a => a.getAttribute('href').startsWith('/objects/Greeting.example.dev/team-'))"),
        true
    );
    let screenshot =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-object-page.png");
    browser.screenshot(&screenshot);
    println!(
        "the set's page, as the browser drew it: {}",
        screenshot.display()
    );
    host.terminate();
}
