"""The config flow against a real Swath: success, a wrong token, an unreachable URL, twice."""

from __future__ import annotations

from custom_components.swath.const import CONF_SITES, DOMAIN
from homeassistant import config_entries
from homeassistant.const import CONF_API_TOKEN, CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

from .helpers import device_mower_ids
from .swath import SwathApi, SwathServer, free_port


async def _user_flow(hass: HomeAssistant, url: str, token: str):
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
