"""Runs the test authorization server on loopback: `python serve.py STATE_DIR PORT` (PORT 0 picks one).

Migrates the SQLite database in STATE_DIR, creates the fixture users and clients, then serves with
Django's threaded development server, changed in one way: a response whose request the test controls
marked as dropped is never written; the connection is shut down instead, so the client sees the
connection close without an answer. Writes the bound port to STATE_DIR/port once it is ready to serve.
"""

import errno
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from django.core.servers.basehttp import ServerHandler, ThreadedWSGIServer, WSGIRequestHandler

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

DROP_KEY = "sessionkit.drop_response"


class DroppingServerHandler(ServerHandler):
    def finish_response(self):
        if not self.environ.get(DROP_KEY):
            return super().finish_response()
        # The application ran to completion (the server rotated the token and committed); only the
        # answer is lost, as when a connection dies on the way back.
        try:
            for _ in self.result:
                pass
            self.request_handler.close_connection = True
            try:
                self.request_handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            self.close()


class RequestHandler(WSGIRequestHandler):
    def handle_one_request(self):
        # Django's handle_one_request, with the ServerHandler above.
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = DroppingServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ())
        handler.request_handler = self
        handler.run(self.server.get_app())


def bind(port):
    """Binds `port`, waiting up to 5 s for a previous server to let go of it, else any free port."""
    deadline = time.monotonic() + 5
    while True:
        try:
            return ThreadedWSGIServer(("127.0.0.1", port), RequestHandler)
        except OSError as error:
            if error.errno != errno.EADDRINUSE or port == 0:
                raise
            if time.monotonic() > deadline:
                print(f"port {port} is taken; serving on another one", file=sys.stderr)
                port = 0
            time.sleep(0.1)


def detach_from_launcher():
    """Undoes what the launching process may have handed down.

    Swift's Foundation `Process` (the test fixture runs this script through it) notices its child's exit by
    the close of a socket the child inherits, and starts children with most signals blocked. A server that
    kept that descriptor would make the fixture wait for it forever, and one that kept the mask would
    ignore `stop`'s SIGTERM.
    """
    os.closerange(3, 65536)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def exit_when_gone(pid):
    """Ends the server once process `pid` is gone, so a test process that dies never leaves its server behind."""
    while True:
        time.sleep(1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass


def main():
    detach_from_launcher()
    watched = os.environ.get("SESSIONKIT_AUTH_SERVER_WATCH_PID", "").strip()
    if watched:
        threading.Thread(target=exit_when_gone, args=(int(watched),), daemon=True).start()
    state_dir = Path(sys.argv[1]).resolve()
    requested_port = int(sys.argv[2])
    server = bind(requested_port)
    port = server.server_address[1]

    os.environ["SESSIONKIT_AUTH_STATE"] = str(state_dir)
    os.environ["SESSIONKIT_AUTH_BASE_URL"] = f"http://127.0.0.1:{port}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "authserver.settings")

    import django
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from authserver.bootstrap import ensure_fixtures

    ensure_fixtures()

    server.set_app(get_wsgi_application())
    (state_dir / "port.tmp").write_text(str(port))
    (state_dir / "port.tmp").replace(state_dir / "port")
    print(f"serving on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
