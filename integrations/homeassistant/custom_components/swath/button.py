"""A "Reset blade" button per mower, only when the entry's token may write."""

from __future__ import annotations

from homeassistant.components.button import ButtonEntity
from homeassistant.const import EntityCategory
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

from .api import SwathError, SwathForbiddenError
from .const import DOMAIN
from .coordinator import SwathConfigEntry, SwathCoordinator
from .entity import SwathEntity, add_entities_per_mower

# One blade reset at a time: each is a write to Swath.
PARALLEL_UPDATES = 1


async def async_setup_entry(
    hass: HomeAssistant,
    entry: SwathConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the buttons of each mower when the token has `write` (a `read` token gets none)."""
    if "write" not in entry.runtime_data.scopes:
        return
    add_entities_per_mower(
        entry,
        async_add_entities,
        lambda coordinator, mower_id: [SwathBladeResetButton(coordinator, mower_id)],
    )


class SwathBladeResetButton(SwathEntity, ButtonEntity):
    """Records a blade change: blade time since reset starts again from zero."""

    _attr_translation_key = "blade_reset"
    _attr_entity_category = EntityCategory.CONFIG

    def __init__(self, coordinator: SwathCoordinator, mower_id: str) -> None:
        """The blade-reset button of this mower."""
        super().__init__(coordinator, mower_id, "blade_reset")

    async def async_press(self) -> None:
        """`POST /v1/mowers/{id}/blade-reset`, then read the new totals."""
        try:
            await self.coordinator.client.blade_reset(self.mower_id)
        except SwathForbiddenError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN, translation_key="blade_reset_forbidden"
            ) from err
        except SwathError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="blade_reset_failed",
                translation_placeholders={"error": str(err)},
            ) from err
        await self.coordinator.async_request_refresh()
