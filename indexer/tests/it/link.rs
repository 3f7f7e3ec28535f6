//! A loopback TCP link to nats-server that a test can cut and restore: one client's view
//! of the network, so that a leader can be kept away from NATS while everything else
//! reaches it.

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// Forwards connections on a free port to nats-server's port while it is up. Cut, it
/// closes every connection through it and holds new ones unanswered until restored, as a
/// partition would: the client behind it reconnects only then.
pub(crate) struct Link {
    port: u16,
    up: watch::Sender<bool>,
    _accepting: AbortOnDropHandle<()>,
}

impl Link {
    pub(crate) async fn to(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let (up, watching) = watch::channel(true);
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream_port, watching.clone()));
            }
        });
        Self {
            port,
            up,
            _accepting: AbortOnDropHandle::new(accepting),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub(crate) fn cut(&self) {
        self.up.send_replace(false);
    }

    pub(crate) fn restore(&self) {
        self.up.send_replace(true);
    }
}

async fn forward(mut client: TcpStream, upstream_port: u16, mut up: watch::Receiver<bool>) {
    if up.wait_for(|up| *up).await.is_err() {
        return;
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
        return;
    };
    tokio::select! {
        _ = copy_bidirectional(&mut client, &mut server) => {}
        _ = up.wait_for(|up| !*up) => {}
    }
}
