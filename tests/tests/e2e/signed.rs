//! Signed plugins: a plugin directory with a trust file serves only files
//! signed by a key it names, checked before anything compiles them, with
//! signatures made by Debian's `minisign` (the format checked against a
//! real signer, not against itself). The adversary can write into the
//! plugin directory but holds no trusted key: each of its files is refused
//! and the version serving keeps serving.

use std::path::{Path, PathBuf};
use std::process::Command;

use beehive_e2e::{Workspace, assert_mentions, plugin_wasm, wait_until};

use crate::observe::metrics_address;

/// Debian's minisign; `scripts/test` installs it.
fn minisign() -> Command {
    let found = Command::new("minisign").arg("-v").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "minisign is not installed: scripts/test installs it (apt-get install minisign)"
    );
    Command::new("minisign")
}

/// A key pair without a password in `dir`: (secret key file, public key line).
fn key_pair(dir: &Path, name: &str) -> (PathBuf, String) {
    let (secret, public) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pub")),
    );
    let made = minisign()
        .args(["-G", "-W", "-s"])
        .arg(&secret)
        .arg("-p")
        .arg(&public)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let line = std::fs::read_to_string(&public)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    (secret, line)
}

/// Signs `file` with `secret`, its trusted comment stating `timestamp`
/// (minisign's own format), into `signature`.
fn sign(secret: &Path, file: &Path, signature: &Path, timestamp: u64) {
    let signed = minisign()
        .arg("-S")
        .arg("-s")
        .arg(secret)
        .arg("-m")
        .arg(file)
        .arg("-x")
        .arg(signature)
        .arg("-t")
        .arg(format!("timestamp:{timestamp}\tfile:greeting.wasm"))
        .output()
        .unwrap();
    assert!(signed.status.success(), "{signed:?}");
}

/// The plugins view's failures, one line each.
fn failures(workspace: &Workspace) -> String {
    let view: serde_json::Value =
        serde_json::from_str(&workspace.ok(&["plugins", "-o", "json"])).unwrap();
    view["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}\n", f["error"].as_str().unwrap()))
        .collect()
}

/// The signer and version `beehive plugins` shows for Greeting.
fn serving(workspace: &Workspace) -> (String, String) {
    let view: serde_json::Value =
        serde_json::from_str(&workspace.ok(&["plugins", "-o", "json"])).unwrap();
    let row = view["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "Greeting.example.dev")
        .cloned()
        .unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    (text(&row["signer"]), text(&row["content_hash"]))
}

/// Puts `bytes` in place as the plugin, signature first: written under a
/// hidden name and renamed, as a deployment does.
fn deploy(plugins: &Path, bytes: &[u8], signature: Option<&Path>) {
    if let Some(signature) = signature {
        std::fs::copy(signature, plugins.join(".sig.tmp")).unwrap();
        std::fs::rename(
            plugins.join(".sig.tmp"),
            plugins.join("greeting.wasm.minisig"),
        )
        .unwrap();
    }
    std::fs::write(plugins.join(".greeting.wasm.tmp"), bytes).unwrap();
    std::fs::rename(
        plugins.join(".greeting.wasm.tmp"),
        plugins.join("greeting.wasm"),
    )
    .unwrap();
}

#[test]
fn only_files_signed_by_a_trusted_key_serve_and_a_refused_one_never_replaces_the_served() {
    let workspace = Workspace::new();
    let plugins = workspace.path().join("plugins");
    let keys = workspace.path().join("keys");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::create_dir_all(&keys).unwrap();
    let (release, release_public) = key_pair(&keys, "release");
    let (stranger, _) = key_pair(&keys, "stranger");
    workspace.write(
        "plugins/trust.toml",
        &format!("[[key]]\nname = \"release\"\nminisign = \"{release_public}\"\n"),
    );
    let (v1, v2) = (plugin_wasm("greeting"), plugin_wasm("greeting_v2"));
    let (v1_bytes, v2_bytes) = (std::fs::read(&v1).unwrap(), std::fs::read(&v2).unwrap());
    let signature = |name: &str| keys.join(format!("{name}.minisig"));
    sign(&release, &v1, &signature("v1"), 1000);
    sign(&release, &v2, &signature("v2"), 2000);
    sign(&stranger, &v2, &signature("v2-stranger"), 3000);

    // Unsigned, under a trust file: refused before it compiles.
    deploy(&plugins, &v1_bytes, None);
    let host = workspace.start_host(&["--metrics-addr", "127.0.0.1:0"]);
    assert_mentions(
        &failures(&workspace),
        &["refused: not signed", "minisign -S"],
    );
    let checked = workspace.fails(&["plugins", "check", "plugins/greeting.wasm"]);
    assert_mentions(&checked, &["not signed"]);

    // Its signature arrives: it serves, and says who signed it.
    deploy(&plugins, &v1_bytes, Some(&signature("v1")));
    wait_until("the signed file serves", || {
        serving(&workspace).0.starts_with("release (")
    });
    let v1_hash = serving(&workspace).1;
    assert_mentions(
        &workspace.ok(&["plugins", "check", "plugins/greeting.wasm"]),
        &["Signature:  signed by release (", "at 1000"],
    );
    workspace.apply(
        "ada.yaml",
        "kind: Greeting.example.dev\nname: ada\nspec: {name: Ada}\n",
    );
    workspace.ok(&["wait", "Greeting", "ada", "--for", "settled"]);

    // Each adversary's file is refused, counted, and version 1 keeps serving.
    let address = metrics_address(&host);
    let refused = || {
        let series = r#"beehive_plugin_load_failures_total{plugin="greeting",reason="signature"}"#;
        crate::observe::value(&crate::observe::scrape(&address), series)
    };
    assert_eq!(refused(), 1.0, "the unsigned file");
    let mut flipped = v2_bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 1;
    for (count, (bytes, sig, why)) in [
        (
            &v2_bytes,
            Some(signature("v2-stranger")),
            "a key this directory does not trust",
        ),
        (&v2_bytes, Some(signature("v1")), "does not match the file"),
        (&flipped, Some(signature("v2")), "does not match the file"),
    ]
    .into_iter()
    .enumerate()
    {
        deploy(&plugins, bytes, sig.as_deref());
        wait_until(&format!("refused: {why}"), || {
            refused() == count as f64 + 2.0
        });
        assert_mentions(&failures(&workspace), &[why]);
        assert_eq!(serving(&workspace).1, v1_hash, "{why}: version 1 serves on");
    }
    // A signature that is a symlink to a good one is not read through.
    std::fs::remove_file(plugins.join("greeting.wasm.minisig")).unwrap();
    std::os::unix::fs::symlink(signature("v2"), plugins.join("greeting.wasm.minisig")).unwrap();
    deploy(&plugins, &v2_bytes, None);
    wait_until("a symlinked signature is refused", || refused() == 5.0);
    assert_mentions(&failures(&workspace), &["is a symlink"]);
    // Still version 1, with no failed pass: a new greeting converges.
    workspace.apply(
        "grace.yaml",
        "kind: Greeting.example.dev\nname: grace\nspec: {name: Grace}\n",
    );
    workspace.ok(&["wait", "Greeting", "grace", "--for", "settled"]);
    assert_eq!(serving(&workspace).1, v1_hash);

    // The next release, signed: it serves, and rewrites every greeting.
    deploy(&plugins, &v2_bytes, Some(&signature("v2")));
    workspace.ok(&[
        "wait",
        "Greeting",
        "ada",
        "--for",
        "jsonpath={.status.release}=2",
        "--timeout",
        "5m",
    ]);
    assert_ne!(serving(&workspace).1, v1_hash);

    // Version 1 again, validly signed but older: a rollback, refused until
    // the operator allows it.
    deploy(&plugins, &v1_bytes, Some(&signature("v1")));
    wait_until("a signed downgrade is refused", || {
        failures(&workspace).contains("a rollback")
    });
    assert_mentions(
        &failures(&workspace),
        &["allow_rollback = true", "greeting.toml"],
    );
    // A restart does not open the door: the store remembers the newest
    // signing time that served.
    host.terminate();
    let host = workspace.start_host(&["--metrics-addr", "127.0.0.1:0"]);
    assert_mentions(&failures(&workspace), &["a rollback", "signed at 2000"]);
    workspace.write("plugins/greeting.toml", "[trust]\nallow_rollback = true\n");
    wait_until("the allowed rollback serves", || {
        serving(&workspace).1 == v1_hash
    });
    host.terminate();
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The digest a push printed (`HOST/REPO@sha256:…` on its last line).
fn pushed_digest(printed: &str) -> String {
    let line = printed.lines().last().unwrap_or_default();
    line.rsplit_once('@')
        .map(|(_, digest)| digest.to_string())
        .unwrap_or_else(|| panic!("no digest in {printed}"))
}

#[test]
fn a_signed_plugin_travels_through_a_registry_by_digest_and_a_lying_one_is_refused() {
    let registry = beehive_e2e::TestRegistry::start();
    let workspace = Workspace::new();
    let (build, plugins, keys) = (
        workspace.path().join("build"),
        workspace.path().join("plugins"),
        workspace.path().join("keys"),
    );
    for dir in [&build, &plugins, &keys] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let (release, release_public) = key_pair(&keys, "release");
    let (stranger, _) = key_pair(&keys, "stranger");
    for (name, plugin, key, at) in [
        ("greeting", "greeting", &release, 1000),
        ("unsigned", "greeting_v3", &release, 0),
        ("stranger", "greeting_v2", &stranger, 3000),
    ] {
        let file = build.join(format!("{name}.wasm"));
        std::fs::copy(plugin_wasm(plugin), &file).unwrap();
        if at > 0 {
            sign(key, &file, &beehive::plugin::signature_of(&file), at);
        }
    }
    let repo = format!("{}/plugins/greeting", registry.address);

    // Push: the artifact and its signature; the digest to pull it by.
    let pushed = workspace.ok(&[
        "plugins",
        "push",
        "build/greeting.wasm",
        &format!("{repo}:v1"),
    ]);
    assert_mentions(&pushed, &["with its signature"]);
    let digest = pushed_digest(&pushed);
    for (name, tag) in [("unsigned", "unsigned"), ("stranger", "stranger")] {
        let file = format!("build/{name}.wasm");
        workspace.ok(&["plugins", "push", &file, &format!("{repo}:{tag}")]);
    }

    // A directory that trusts the release key pulls by digest and serves.
    workspace.write(
        "plugins/trust.toml",
        &format!("[[key]]\nname = \"release\"\nminisign = \"{release_public}\"\n"),
    );
    let host = workspace.start_host(&[]);
    let pulled = workspace.ok(&[
        "plugins",
        "pull",
        &format!("{repo}@{digest}"),
        "-o",
        "plugins/greeting.wasm",
    ]);
    assert_mentions(&pulled, &[&digest, "signed by release ("]);
    assert_eq!(
        std::fs::read(plugins.join("greeting.wasm")).unwrap(),
        std::fs::read(plugin_wasm("greeting")).unwrap(),
        "the very bytes pushed"
    );
    wait_until("the pulled plugin serves", || {
        serving(&workspace).0.starts_with("release (")
    });
    let served = serving(&workspace).1;

    // Refused, and nothing written: unsigned, signed by a stranger, a
    // digest the registry does not have.
    for (reference, why) in [
        (format!("{repo}:unsigned"), "not signed"),
        (
            format!("{repo}:stranger"),
            "a key this directory does not trust",
        ),
        (
            format!("{repo}@sha256:{}", "0".repeat(64)),
            "has no sha256:",
        ),
    ] {
        let refused =
            workspace.fails(&["plugins", "pull", &reference, "-o", "plugins/greeting.wasm"]);
        assert_mentions(&refused, &[why]);
        assert_eq!(serving(&workspace).1, served, "{why}: nothing replaced");
    }
    // The target's own policy, unreadable as a policy: refused, not read as
    // no policy (which would drop the keys it narrows to).
    workspace.write("plugins/other.toml", "[trust]\nkeys = 5\n");
    let refused = workspace.fails(&[
        "plugins",
        "pull",
        &format!("{repo}@{digest}"),
        "-o",
        "plugins/other.wasm",
    ]);
    assert_mentions(&refused, &["other.toml", "nothing written"]);
    assert!(!plugins.join("other.wasm").exists());
    std::fs::remove_file(plugins.join("other.toml")).unwrap();

    // A registry that serves other bytes for a digest: refused, nothing
    // written, even where nothing is trusted.
    let layer = sha256_hex(&std::fs::read(plugin_wasm("greeting")).unwrap());
    let stored = registry.blob_file(&layer);
    let mut other = std::fs::read(&stored).unwrap();
    other[100] ^= 1;
    std::fs::write(&stored, other).unwrap();
    let refused = workspace.fails(&[
        "plugins",
        "pull",
        &format!("{repo}@{digest}"),
        "-o",
        "elsewhere.wasm",
    ]);
    assert_mentions(&refused, &["served other bytes", "nothing written"]);
    assert!(!workspace.path().join("elsewhere.wasm").exists());
    assert!(!workspace.path().join("elsewhere.wasm.minisig").exists());
    host.terminate();
}

#[test]
fn a_plugin_signed_in_cosigns_key_based_format_serves_under_its_p256_key() {
    let workspace = Workspace::new();
    let (plugins, keys) = (
        workspace.path().join("plugins"),
        workspace.path().join("keys"),
    );
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::create_dir_all(&keys).unwrap();
    // openssl writes what `cosign generate-key-pair` and `cosign sign-blob
    // --key` do: a P-256 SubjectPublicKeyInfo PEM, and the base64 of a DER
    // signature over the file's SHA-256.
    let openssl = |args: &[&str]| {
        let done = Command::new("openssl")
            .args(args)
            .current_dir(&keys)
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
    };
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        "cosign.key",
    ]);
    openssl(&["ec", "-in", "cosign.key", "-pubout", "-out", "cosign.pub"]);
    let plugin = keys.join("greeting.wasm");
    std::fs::copy(plugin_wasm("greeting"), &plugin).unwrap();
    openssl(&[
        "dgst",
        "-sha256",
        "-sign",
        "cosign.key",
        "-out",
        "sig.der",
        "greeting.wasm",
    ]);
    let der = std::fs::read(keys.join("sig.der")).unwrap();
    std::fs::write(plugins.join("greeting.wasm.sig"), base64(&der)).unwrap();
    let pem = std::fs::read_to_string(keys.join("cosign.pub")).unwrap();
    workspace.write(
        "plugins/trust.toml",
        &format!("[[key]]\nname = \"ci\"\ncosign = \"\"\"\n{pem}\"\"\"\n"),
    );
    std::fs::copy(&plugin, plugins.join("greeting.wasm")).unwrap();
    assert_mentions(
        &workspace.ok(&["plugins", "check", "plugins/greeting.wasm"]),
        &["Signature:  signed by ci ("],
    );
    let host = workspace.start_host(&[]);
    wait_until("the cosign-signed plugin serves", || {
        serving(&workspace).0.starts_with("ci (")
    });
    host.terminate();
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// A registry that is no registry: each route of a [`TestServer`] answers
/// as the adversary would.
#[test]
fn a_registry_that_trickles_offers_a_huge_layer_or_redirects_elsewhere_is_refused() {
    let registry = beehive_e2e::TestServer::start();
    let workspace = Workspace::new();
    let layer = vec![b'x'; 2000];
    let layer_digest = format!("sha256:{}", sha256_hex(&layer));
    let manifest = |size: u64| {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
"config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"sha256:{}","size":2}},
"layers":[{{"mediaType":"application/wasm","digest":"{layer_digest}","size":{size}}}]}}"#,
            sha256_hex(b"{}")
        )
    };
    let blob = format!("/v2/plugins/evil/blobs/{layer_digest}");
    let pull = |tag: &str, timeout: &str| {
        let started = std::time::Instant::now();
        let refused = workspace.fails(&[
            "plugins",
            "pull",
            &format!("{}/plugins/evil:{tag}", registry.authority()),
            "-o",
            "evil.wasm",
            "--timeout",
            timeout,
        ]);
        assert!(!workspace.path().join("evil.wasm").exists(), "{tag}");
        assert!(
            !workspace.path().join("evil.wasm.minisig").exists(),
            "{tag}"
        );
        (refused, started.elapsed())
    };

    // A 10 GB layer: refused on the manifest's word, nothing fetched.
    registry.route(
        "/v2/plugins/evil/manifests/huge",
        200,
        manifest(10_000_000_000),
    );
    let (refused, _) = pull("huge", "60s");
    assert_mentions(
        &refused,
        &["a layer of 10000000000 bytes", "nothing was fetched"],
    );
    assert_eq!(registry.hits(&blob), 0, "the layer was never asked for");

    // A layer that trickles (a byte every 50 ms, 100 s in all): cut off at
    // the call's timeout.
    registry.route(
        "/v2/plugins/evil/manifests/slow",
        200,
        manifest(layer.len() as u64),
    );
    registry.route_trickled(&blob, std::time::Duration::from_millis(50), layer.clone());
    let (refused, took) = pull("slow", "1s");
    assert_mentions(&refused, &["did not answer within 1s"]);
    assert!(
        took < std::time::Duration::from_secs(30),
        "cut off at its timeout, not at the body's end: {took:?}"
    );

    // A layer that redirects to another host: not followed.
    registry.route_redirect(&blob, &format!("http://registry.elsewhere.example{blob}"));
    let (refused, _) = pull("slow", "60s");
    assert_mentions(
        &refused,
        &[
            "redirected to http://registry.elsewhere.example",
            "not followed",
        ],
    );
}
