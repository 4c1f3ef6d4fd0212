//! rmcp's Streamable HTTP service behind one `Arc`.
//!
//! axum clones a route's service for every request, and rmcp's own `call` clones it once more;
//! each clone copies its configuration (the allowed hosts and origins, a few `String`s each)
//! and drops it again. Measured under callgrind, those clones and drops were ~10% of a tool
//! call's instructions. This wrapper clones one reference count instead and calls
//! rmcp's `handle` on the shared service.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::SessionManager;

pub struct SharedService<S, M>(Arc<StreamableHttpService<S, M>>);

impl<S, M> SharedService<S, M> {
    pub fn new(service: StreamableHttpService<S, M>) -> Self {
        Self(Arc::new(service))
    }
}

impl<S, M> Clone for SharedService<S, M> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S, M> tower::Service<Request<Body>> for SharedService<S, M>
where
    S: rmcp::ServerHandler + Send + 'static,
    M: SessionManager,
{
    type Response = Response<BoxBody<Bytes, Infallible>>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}
