"""Locks or unlocks the GNOME Keyring's login collection without a prompt, for SessionKit's locked-launch tests.

    keyring_lock.py lock
    keyring_lock.py unlock PASSWORD

`lock` calls the Secret Service's Lock on the login collection, as a desktop does when the screen locks. `unlock`
calls gnome-keyring's UnlockWithMasterPassword over a plain session (the headless way: the Secret Service's Unlock
would ask a prompter, and there is no display). PASSWORD is what scripts/with-keyring gave the daemon; the daemon
keeps the newline it read on stdin, so one is added. Prints the collection's state afterwards: `locked` or
`unlocked`. Runs in the session bus of DBUS_SESSION_BUS_ADDRESS; exits 1 with the D-Bus error on failure.
"""
import sys

from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

BUS_NAME = 'org.freedesktop.secrets'
ROOT = '/org/freedesktop/secrets'
COLLECTION = ROOT + '/collection/login'
SERVICE = DBusAddress(ROOT, bus_name=BUS_NAME, interface='org.freedesktop.Secret.Service')
INTERNAL = DBusAddress(ROOT, bus_name=BUS_NAME, interface='org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface')
PROPERTIES = DBusAddress(COLLECTION, bus_name=BUS_NAME, interface='org.freedesktop.DBus.Properties')


def call(connection, message):
    reply = connection.send_and_get_reply(message)
    if reply.header.message_type == MessageType.error:
        sys.exit(f'keyring_lock: {reply.body[0] if reply.body else "D-Bus error"}')
    return reply.body


def main(arguments):
    if not arguments or arguments[0] not in ('lock', 'unlock') or (arguments[0] == 'unlock') != (len(arguments) == 2):
        sys.exit('usage: keyring_lock.py lock | unlock PASSWORD')
    with open_dbus_connection(bus='SESSION') as connection:
        if arguments[0] == 'lock':
            call(connection, new_method_call(SERVICE, 'Lock', 'ao', ([COLLECTION],)))
        else:
            session = call(connection, new_method_call(SERVICE, 'OpenSession', 'sv', ('plain', ('s', ''))))[1]
            secret = (session, b'', (arguments[1] + '\n').encode(), 'text/plain')
            call(connection, new_method_call(INTERNAL, 'UnlockWithMasterPassword', 'o(oayays)', (COLLECTION, secret)))
        locked = call(connection, new_method_call(PROPERTIES, 'Get', 'ss', ('org.freedesktop.Secret.Collection', 'Locked')))
        print('locked' if locked[0][1] else 'unlocked')


if __name__ == '__main__':
    main(sys.argv[1:])
