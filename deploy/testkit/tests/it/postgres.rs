//! Private PostgreSQL clusters start side by side, answer on their own ports, and go away
//! with their handles.

use std::net::TcpStream;

use gantry_testkit::Postgres;

#[test]
fn two_private_clusters_answer_on_their_own_ports_and_stop_on_drop() {
    // Started concurrently, as parallel tests of another crate would.
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(Postgres::start);
        let second = scope.spawn(Postgres::start);
        (
            first.join().unwrap().expect("first cluster starts"),
            second.join().unwrap().expect("second cluster starts"),
        )
    });
    assert_ne!(first.port(), second.port());
    assert_ne!(first.socket_dir(), second.socket_dir());

    for postgres in [&first, &second] {
        assert_eq!(
            postgres.url(),
            format!("postgres://gantry@127.0.0.1:{}/gantry", postgres.port())
        );
        TcpStream::connect(("127.0.0.1", postgres.port())).expect("the server listens");
        assert_eq!(postgres.psql("select 1").expect("psql"), "1");
        assert_eq!(
            postgres
                .psql("select current_database(), current_user")
                .expect("psql"),
            "gantry|gantry"
        );
    }

    // Separate clusters: what one stores, the other does not see.
    first
        .psql("create table only_here (x int); insert into only_here values (42)")
        .expect("create table");
    assert_eq!(first.psql("select x from only_here").expect("select"), "42");
    assert_eq!(
        second
            .psql("select count(*) from pg_tables where tablename = 'only_here'")
            .expect("select"),
        "0"
    );

    let (port, dir) = (first.port(), first.socket_dir().to_path_buf());
    drop(first);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens on {port} after drop"
    );
    assert!(!dir.exists(), "{} is removed on drop", dir.display());
    assert_eq!(
        second.psql("select 1").expect("psql"),
        "1",
        "the other cluster still answers"
    );
}
