//! A tour of the store and the clients: `cargo run -p beehive --example tour [DB]`.
//!
//! Creates a project and two clusters it owns, shows that re-applying the same
//! spec writes nothing, reads the ownership both ways, and marks one cluster
//! for deletion. With a DB path the database is kept, so `beehive get` can
//! read it afterwards.

use beehive::{Client, CreateOptions, GroupKind, RawClient, Store, client::Loads};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
struct ClusterSpec {
    region: String,
    replicas: u32,
}

#[derive(Serialize, Deserialize, Debug)]
struct ClusterStatus {
    ready: u32,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> beehive::Result<()> {
    let store = match std::env::args().nth(1) {
        Some(path) => Store::open(path)?,
        None => Store::temporary()?,
    };
    println!("store: {}", store.path().display());

    let projects = RawClient::new(&store, GroupKind::new("acme.com", "Project"));
    let clusters: Client<ClusterSpec, ClusterStatus> =
        Client::new(&store, GroupKind::new("acme.com", "Cluster"));

    let (project, _) = projects
        .get_or_create(
            "web",
            beehive::Json::parse(r#"{"team":"web"}"#)?,
            CreateOptions::new(),
        )
        .await?;
    for (name, region) in [("web-eu", "eu-west"), ("web-us", "us-east")] {
        let spec = ClusterSpec {
            region: region.into(),
            replicas: 3,
        };
        let (cluster, created) = clusters
            .create_or_update(name, &spec, CreateOptions::new().owner(project.meta.id))
            .await?;
        println!(
            "{} {name}: generation {}, resource_version {}",
            if created { "created" } else { "kept" },
            cluster.meta.generation,
            cluster.meta.resource_version
        );
    }

    let before = store.resource_version();
    let same = ClusterSpec {
        region: "eu-west".into(),
        replicas: 3,
    };
    clusters.update_by_name("web-eu", &same).await?;
    println!(
        "re-applying the same spec moved resource_version by {}",
        store.resource_version() - before
    );

    let loaded = projects.get_with(project.meta.id, Loads::none().owned())?;
    println!("project web owns {} objects", loaded.owned()?.len());
    for cluster in clusters.list_owned_objects_with(project.meta.id, Loads::none().owner())? {
        let owner = cluster.owner()?.map(|o| o.id);
        println!(
            "  {} in {} (owner {owner:?})",
            cluster.name(),
            cluster.spec.region
        );
    }

    clusters.delete_by_name("web-us").await?;
    let deleting = clusters.get_by_name("web-us")?;
    println!(
        "web-us deletion requested at {:?}; the row stays until garbage collection",
        deleting.meta.deletion_requested_at
    );
    Ok(())
}
