"""OpenID Connect claims of the test server's users (test project only).

DOT's validator puts only `sub` (the user's primary key, as a string) in ID tokens and userinfo. This one adds
the standard claims a sign-in shows, each gated by its scope as DOT's `oidc_claim_scope` says: `profile` gives
`preferred_username`, `name`, `given_name`, `family_name`; `email` gives `email`, `email_verified`.
"""

from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    # Request-agnostic (no `request` parameter): DOT then lists these claims in discovery's claims_supported.
    def get_additional_claims(self):
        return {
            "preferred_username": lambda request: request.user.username,
            "name": lambda request: request.user.get_full_name() or request.user.username,
            "given_name": lambda request: request.user.first_name,
            "family_name": lambda request: request.user.last_name,
            "email": lambda request: request.user.email,
            "email_verified": lambda request: bool(request.user.email),
        }
