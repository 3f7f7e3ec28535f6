//! The private Docker engine starts, answers, and goes away with its handle.

use gantry_testkit::Dockerd;

#[test]
fn a_private_dockerd_answers_on_its_socket_and_stops_on_drop() {
    let dockerd = Dockerd::start().expect("dockerd starts");
    assert!(
        dockerd.ping().expect("ping"),
        "dockerd answers /_ping with OK"
    );
    let socket = dockerd.socket().to_path_buf();
    drop(dockerd);
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_err(),
        "nothing listens on {} after drop",
        socket.display()
    );
}
