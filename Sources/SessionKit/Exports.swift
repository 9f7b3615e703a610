// The protocol module is part of what an app gets with `import SessionKit`: its clients, tokens and errors are the
// session's too.
@_exported import SessionKitOAuth
