"""What the services and the clients share, written once: the folds of a
session's log (every state a client or a service reads from it), the plan
state with its one converter to and from the wire, and the channel
interceptor that puts a token on every call. Pure code over the generated
protobuf types: no servers, no storage, no I/O; it imports neither
`services` nor `clients`."""
