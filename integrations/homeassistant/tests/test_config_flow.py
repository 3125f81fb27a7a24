"""The config flow against a real Swath: success, each error and the recovery from it, twice,
re-authentication, reconfiguration and the site option."""

from __future__ import annotations

from custom_components.swath.const import CONF_SITES, DOMAIN
from aiohttp import web
import pytest

from homeassistant import config_entries
from homeassistant.config_entries import ConfigFlowResult
from homeassistant.const import CONF_API_TOKEN, CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers.selector import TextSelector

from .conftest import OtherServer, config_entry, setup_entry
from .helpers import device_mower_ids
from .swath import SwathApi, SwathServer, free_port


async def _user_flow(hass: HomeAssistant, url: str, token: str) -> ConfigFlowResult:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "user"
    return await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_URL: url, CONF_API_TOKEN: token}
    )


async def test_user_flow_creates_the_entry(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """A valid URL and token: the entry is the demo account, its unique id account and URL."""
    result = await _user_flow(hass, swath.url + "/", swath.token)
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["title"] == "Demo Gardens"
    assert result["data"] == {CONF_URL: swath.url, CONF_API_TOKEN: swath.token}
    account = await api.account_id()
    assert result["result"].unique_id == f"{account}@{swath.url}"
    await hass.config_entries.async_unload(result["result"].entry_id)


async def test_wrong_token_is_invalid_auth(hass: HomeAssistant, swath: SwathServer) -> None:
    """Swath answers 401: the form says invalid_auth and no entry is made."""
    result = await _user_flow(hass, swath.url, "not-a-token-of-this-swath-0123456789")
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": "invalid_auth"}
    assert hass.config_entries.async_entries(DOMAIN) == []


async def test_unreachable_url_is_cannot_connect(
    hass: HomeAssistant, swath: SwathServer
) -> None:
    """Nothing listens there: cannot_connect."""
    result = await _user_flow(hass, f"http://127.0.0.1:{free_port()}", swath.token)
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": "cannot_connect"}


async def test_same_account_twice_is_refused(hass: HomeAssistant, swath: SwathServer) -> None:
    """The second flow for the same account and URL aborts as already_configured."""
    first = await _user_flow(hass, swath.url, swath.token)
    assert first["type"] is FlowResultType.CREATE_ENTRY
    second = await _user_flow(hass, swath.url, swath.token)
    assert second["type"] is FlowResultType.ABORT
    assert second["reason"] == "already_configured"
    assert len(hass.config_entries.async_entries(DOMAIN)) == 1
    await hass.config_entries.async_unload(first["result"].entry_id)


async def test_reconfigure_moves_the_entry_to_another_url(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """The same Swath by another name: the URL and the unique id follow, the token stays."""
    created = await _user_flow(hass, swath.url, swath.token)
    entry = created["result"]
    result = await hass.config_entries.flow.async_init(
        DOMAIN,
        context={"source": config_entries.SOURCE_RECONFIGURE, "entry_id": entry.entry_id},
    )
    assert result["step_id"] == "reconfigure"
    other = f"http://localhost:{swath.port}"
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_URL: other})
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    assert entry.data == {CONF_URL: other, CONF_API_TOKEN: swath.token}
    assert entry.unique_id == f"{await api.account_id()}@{other}"
    await hass.async_block_till_done()
    await hass.config_entries.async_unload(entry.entry_id)


async def test_the_site_option_limits_the_mowers(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Choosing one site keeps its mowers' devices and removes the others'."""
    sites = await api.sites()
    here = (await api.create_mower(sites[0]["id"], "Here", "SN-H"))["id"]
    there = (await api.create_mower(sites[1]["id"], "There", "SN-T"))["id"]
    created = await _user_flow(hass, swath.url, swath.token)
    entry = created["result"]
    await hass.async_block_till_done()
    assert device_mower_ids(hass, entry.entry_id) == {here, there}

    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["step_id"] == "init"
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {CONF_SITES: [sites[0]["id"]]}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()
    assert entry.options == {CONF_SITES: [sites[0]["id"]]}
    assert entry.runtime_data.stream_params()["sites"] == sites[0]["id"]
    assert device_mower_ids(hass, entry.entry_id) == {here}
    await hass.config_entries.async_unload(entry.entry_id)


async def _retry(
    hass: HomeAssistant, failed: ConfigFlowResult, url: str, token: str
) -> ConfigFlowResult:
    """The same form again, now filled right: the flow recovers from its error."""
    assert failed["type"] is FlowResultType.FORM
    return await hass.config_entries.flow.async_configure(
        failed["flow_id"], {CONF_URL: url, CONF_API_TOKEN: token}
    )


def _suggested(result: ConfigFlowResult, key: str) -> object:
    for field in result["data_schema"].schema:
        if field == key:
            return (field.description or {}).get("suggested_value")
    raise AssertionError(f"no field {key}")


@pytest.mark.parametrize(
    ("url_of", "error"),
    [
        (lambda swath, other: "ftp://swath.local", "invalid_url"),
        (lambda swath, other: f"http://127.0.0.1:{free_port()}", "cannot_connect"),
        # A path Swath does not serve: 404 on /v1/me.
        (lambda swath, other: f"{swath.url}/elsewhere", "not_swath"),
        # A web server that answers HTML.
        (lambda swath, other: other.url, "not_swath"),
    ],
)
async def test_each_url_error_is_said_and_the_flow_recovers(
    hass: HomeAssistant,
    swath: SwathServer,
    other_server: OtherServer,
    url_of: object,
    error: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The form says what is wrong, keeps the URL but not the token, and accepts a right one."""
    url = url_of(swath, other_server)  # type: ignore[operator]
    failed = await _user_flow(hass, url, swath.token)
    assert failed["errors"] == {"base": error}
    assert _suggested(failed, CONF_URL) == url
    assert _suggested(failed, CONF_API_TOKEN) is None
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not [r for r in caplog.records if r.exc_info]
    created = await _retry(hass, failed, swath.url, swath.token)
    assert created["type"] is FlowResultType.CREATE_ENTRY
    await hass.config_entries.async_unload(created["result"].entry_id)


async def test_the_token_is_a_password_field(hass: HomeAssistant, swath: SwathServer) -> None:
    """The token is typed as a password and never echoed back after a refusal."""
    failed = await _user_flow(hass, swath.url, "not-a-token-of-this-swath-0123456789")
    assert failed["errors"] == {"base": "invalid_auth"}
    field = failed["data_schema"].schema[CONF_API_TOKEN]
    assert isinstance(field, TextSelector)
    assert field.config["type"] == "password"
    assert _suggested(failed, CONF_API_TOKEN) is None
    created = await _retry(hass, failed, swath.url, swath.token)
    assert created["type"] is FlowResultType.CREATE_ENTRY
    await hass.config_entries.async_unload(created["result"].entry_id)


async def test_json_that_is_not_swath_and_other_answers(
    hass: HomeAssistant, swath: SwathServer, other_server: OtherServer
) -> None:
    """JSON without Swath's account is not_swath; any other refusal is unknown, without a trace."""
    other_server.answer = web.json_response({"status": "ok"})
    failed = await _user_flow(hass, other_server.url, swath.token)
    assert failed["errors"] == {"base": "not_swath"}
    other_server.answer = web.json_response({"title": "teapot"}, status=418)
    failed = await _retry(hass, failed, other_server.url, swath.token)
    assert failed["errors"] == {"base": "unknown"}
    created = await _retry(hass, failed, swath.url, swath.token)
    assert created["type"] is FlowResultType.CREATE_ENTRY
    await hass.config_entries.async_unload(created["result"].entry_id)


async def test_reauth_refuses_a_bad_token_and_another_account(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """A refused token is said and can be fixed; a token of another account aborts."""
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    result = await entry.start_reauth_flow(hass)
    assert result["step_id"] == "reauth_confirm"
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_TOKEN: "not-a-token-of-this-swath-0123456789"}
    )
    assert result["errors"] == {"base": "invalid_auth"}
    other = await api.call("POST", "/v1/accounts", {"name": "Neighbours"})
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_TOKEN: other["token"]["token"]}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "wrong_account"
    assert entry.data[CONF_API_TOKEN] == swath.token
    await hass.config_entries.async_unload(entry.entry_id)


async def test_reauth_reloads_the_entry_once(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new token: one reload (not a second one from the update listener)."""
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    reloads: list[str] = []
    reload = hass.config_entries.async_reload

    async def counted(entry_id: str) -> bool:
        reloads.append(entry_id)
        return await reload(entry_id)

    monkeypatch.setattr(hass.config_entries, "async_reload", counted)
    fresh = await api.call("POST", "/v1/tokens", {"name": "ha 2", "scopes": ["read"]})
    result = await entry.start_reauth_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_API_TOKEN: fresh["token"]}
    )
    assert result["reason"] == "reauth_successful"
    await hass.async_block_till_done()
    assert reloads == [entry.entry_id]
    await hass.config_entries.async_unload(entry.entry_id)


async def test_reconfigure_errors_other_accounts_and_taken_urls(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """An unreachable URL is said; a Swath where the token is another account's aborts."""
    account = await api.account_id()
    first = config_entry(swath.url, swath.token, account)
    await setup_entry(hass, first)
    result = await first.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_URL: f"http://127.0.0.1:{free_port()}"}
    )
    assert result["errors"] == {"base": "cannot_connect"}
    # Recovers: the same URL under another name is another entry's already.
    other_name = f"http://localhost:{swath.port}"
    second = config_entry(other_name, swath.token, account)
    second.add_to_hass(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_URL: other_name}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "already_configured"

    # A token that Swath now answers with another account (its entry was made for another).
    neighbours = await api.call("POST", "/v1/accounts", {"name": "Neighbours"})
    third = config_entry(swath.url, neighbours["token"]["token"], "someone-else")
    third.add_to_hass(hass)
    result = await third.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_URL: swath.url}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "wrong_account"
    await hass.config_entries.async_unload(first.entry_id)


async def test_the_site_option_aborts_when_swath_refuses_or_is_gone(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi
) -> None:
    """Options need the sites: a revoked token aborts invalid_auth, a stopped Swath cannot_connect."""
    created = await api.call("POST", "/v1/tokens", {"name": "ha", "scopes": ["read"]})
    entry = config_entry(swath.url, created["token"], await api.account_id())
    await setup_entry(hass, entry)
    await api.call("DELETE", f"/v1/tokens/{created['id']}")
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "invalid_auth"
    await hass.async_add_executor_job(swath.stop)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "cannot_connect"
    await hass.config_entries.async_unload(entry.entry_id)
