"""Config flow: a Swath URL and an API token, checked with `GET /v1/me`."""

from __future__ import annotations

from collections.abc import Mapping
import logging
from typing import Any

import voluptuous as vol

from homeassistant.config_entries import (
    ConfigFlow,
    ConfigFlowResult,
    OptionsFlow,
)
from homeassistant.const import CONF_API_TOKEN, CONF_URL
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.aiohttp_client import async_get_clientsession
from homeassistant.helpers.selector import (
    TextSelector,
    TextSelectorConfig,
    TextSelectorType,
)

from .api import (
    SwathAuthError,
    SwathClient,
    SwathConnectionError,
    SwathError,
    SwathNotFoundError,
    SwathNotSwathError,
    normalize_url,
)
from .const import CONF_SITES, DOMAIN
from .coordinator import SwathConfigEntry

_LOGGER = logging.getLogger(__name__)

# The token is typed, never shown again: not even after an error, when the form comes back.
TOKEN_SELECTOR = TextSelector(TextSelectorConfig(type=TextSelectorType.PASSWORD))
URL_SELECTOR = TextSelector(TextSelectorConfig(type=TextSelectorType.URL))


def unique_id(account_id: str, url: str) -> str:
    """One entry per account of a deployment (every demo account has the same id)."""
    return f"{account_id}@{url}"


async def _who(hass: HomeAssistant, url: str, token: str) -> tuple[str, dict[str, Any]]:
    """Normalised URL and `GET /v1/me`, or an error key in place of the answer."""
    try:
        url = normalize_url(url)
    except ValueError:
        return url, {"error": "invalid_url"}
    try:
        me = await SwathClient(async_get_clientsession(hass), url, token).me()
    except SwathAuthError:
        return url, {"error": "invalid_auth"}
    except SwathConnectionError:
        return url, {"error": "cannot_connect"}
    except (SwathNotSwathError, SwathNotFoundError) as err:
        _LOGGER.debug("%s does not answer as Swath: %s.", url, err)
        return url, {"error": "not_swath"}
    except SwathError as err:
        _LOGGER.warning("Swath at %s answered GET /v1/me unexpectedly: %s.", url, err)
        return url, {"error": "unknown"}
    if not isinstance(me, dict) or not isinstance(me.get("account"), dict):
        _LOGGER.debug("%s answered GET /v1/me with JSON that is not Swath's.", url)
        return url, {"error": "not_swath"}
    return url, me


class SwathConfigFlow(ConfigFlow, domain=DOMAIN):
    """Add a Swath account; re-authenticate it; move it to another URL."""

    VERSION = 1

    async def async_step_user(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask for the URL and the token."""
        errors: dict[str, str] = {}
        if user_input is not None:
            url, me = await _who(self.hass, user_input[CONF_URL], user_input[CONF_API_TOKEN])
            if "error" in me:
                errors["base"] = me["error"]
            else:
                await self.async_set_unique_id(unique_id(me["account"]["id"], url))
                self._abort_if_unique_id_configured()
                return self.async_create_entry(
                    title=me["account"]["name"],
                    data={CONF_URL: url, CONF_API_TOKEN: user_input[CONF_API_TOKEN]},
                )
        return self.async_show_form(
            step_id="user",
            data_schema=self.add_suggested_values_to_schema(
                vol.Schema(
                    {
                        vol.Required(CONF_URL): URL_SELECTOR,
                        vol.Required(CONF_API_TOKEN): TOKEN_SELECTOR,
                    }
                ),
                # The URL comes back after an error; the token never does.
                {CONF_URL: user_input[CONF_URL]} if user_input else None,
            ),
            errors=errors,
        )

    async def async_step_reauth(
        self, entry_data: Mapping[str, Any]
    ) -> ConfigFlowResult:
        """The token was refused or revoked: ask for another."""
        return await self.async_step_reauth_confirm()

    async def async_step_reauth_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """A new token of the same account."""
        entry = self._get_reauth_entry()
        errors: dict[str, str] = {}
        if user_input is not None:
            _, me = await _who(self.hass, entry.data[CONF_URL], user_input[CONF_API_TOKEN])
            if "error" in me:
                errors["base"] = me["error"]
            else:
                await self.async_set_unique_id(
                    unique_id(me["account"]["id"], entry.data[CONF_URL])
                )
                self._abort_if_unique_id_mismatch(reason="wrong_account")
                return self.async_update_reload_and_abort(
                    entry, data_updates={CONF_API_TOKEN: user_input[CONF_API_TOKEN]}
                )
        return self.async_show_form(
            step_id="reauth_confirm",
            data_schema=vol.Schema({vol.Required(CONF_API_TOKEN): TOKEN_SELECTOR}),
            description_placeholders={"url": entry.data[CONF_URL], "title": entry.title},
            errors=errors,
        )

    async def async_step_reconfigure(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Another URL for the same account (the token is kept)."""
        entry = self._get_reconfigure_entry()
        errors: dict[str, str] = {}
        if user_input is not None:
            url, me = await _who(self.hass, user_input[CONF_URL], entry.data[CONF_API_TOKEN])
            if "error" in me:
                errors["base"] = me["error"]
            elif unique_id(me["account"]["id"], entry.data[CONF_URL]) != entry.unique_id:
                return self.async_abort(reason="wrong_account")
            else:
                new_id = unique_id(me["account"]["id"], url)
                if new_id != entry.unique_id:
                    await self.async_set_unique_id(new_id)
                    self._abort_if_unique_id_configured()
                return self.async_update_reload_and_abort(
                    entry, unique_id=new_id, data_updates={CONF_URL: url}
                )
        return self.async_show_form(
            step_id="reconfigure",
            data_schema=self.add_suggested_values_to_schema(
                vol.Schema({vol.Required(CONF_URL): URL_SELECTOR}),
                user_input or {CONF_URL: entry.data[CONF_URL]},
            ),
            errors=errors,
        )

    @staticmethod
    @callback
    def async_get_options_flow(config_entry: SwathConfigEntry) -> SwathOptionsFlow:
        """Limit the entry to some sites."""
        return SwathOptionsFlow()


class SwathOptionsFlow(OptionsFlow):
    """Which sites' mowers the entry shows (none chosen: every site the token sees)."""

    async def async_step_init(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Pick sites among those the token sees."""
        if user_input is not None:
            return self.async_create_entry(data={CONF_SITES: user_input[CONF_SITES]})
        try:
            sites = await self.config_entry.runtime_data.client.sites()
        except SwathAuthError:
            return self.async_abort(reason="invalid_auth")
        except SwathError:
            return self.async_abort(reason="cannot_connect")
        choices = {site["id"]: site["name"] for site in sites}
        current = [s for s in self.config_entry.options.get(CONF_SITES, []) if s in choices]
        return self.async_show_form(
            step_id="init",
            data_schema=vol.Schema(
                {vol.Optional(CONF_SITES, default=current): cv.multi_select(choices)}
            ),
        )
