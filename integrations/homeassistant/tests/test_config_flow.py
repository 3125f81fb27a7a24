"""The config flow against a real Swath: success, a wrong token, an unreachable URL, twice."""

from __future__ import annotations

from custom_components.swath.const import DOMAIN
from homeassistant import config_entries
from homeassistant.const import CONF_API_TOKEN, CONF_URL
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType

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
