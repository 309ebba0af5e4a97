"""The service: a bundle over HTTP (``cea serve``): its routes, the queues and batching between requests and the bundle,
its processes, and Label Studio's ML backend protocol."""
