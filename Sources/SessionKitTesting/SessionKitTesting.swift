import SessionKit
