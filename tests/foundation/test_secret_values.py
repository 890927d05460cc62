"""The held-secrets registry: each form of a held value is masked, short values only as whole tokens."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

from provision.site.credentials import Login, Secret
from provision.state.redact import redact
from provision.state.secret_values import MASK, hold_maas_key, mask


def test_every_form_of_a_login_is_masked_in_text_and_evidence() -> None:
    password = "Reg1stry+Test/Pass=&%\"x"
    Login("admin", Secret(password))
    forms = [password, quote(password, safe=""), quote_plus(password), json.dumps(password)[1:-1],
             base64.b64encode(f"admin:{password}".encode()).decode()]
    for form in forms:
        assert mask(f"the BMC said: {form}!") == f"the BMC said: {MASK}!", form
        assert redact({"error": {"message": f"you sent {form}"}}) == {"error": {"message": f"you sent {MASK}"}}


def test_each_part_of_a_maas_key_is_masked() -> None:
    hold_maas_key("RegConsumerKey0001:RegTokenKey0000002:RegTokenSecret00000000000003")
    header = ('OAuth oauth_consumer_key="RegConsumerKey0001", oauth_token="RegTokenKey0000002", '
              'oauth_signature="%26RegTokenSecret00000000000003"')
    assert "Reg" not in mask(header)


def test_a_short_secret_is_masked_as_a_token_not_inside_words() -> None:
    Secret("qzxw7")
    assert mask("password qzxw7 rejected; qzxw7s and aqzxw7 are longer words") == (
        f"password {MASK} rejected; qzxw7s and aqzxw7 are longer words")
