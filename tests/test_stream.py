

async def test_a_swath_shutting_down_ends_the_stream_and_is_rejoined_at_once(
    hass: HomeAssistant, swath: SwathServer, api: SwathApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM: the stream's `end` (`shutdown`), no re-auth; Swath back: the stream and the
    entities follow by the /healthz probe, not after a back-off (made an hour long here)."""
    monkeypatch.setattr(const, "STREAM_RETRY_MIN_SECONDS", 3600.0)
    monkeypatch.setattr(const, "STREAM_RETRY_MAX_SECONDS", 3600.0)
    monkeypatch.setattr(const, "HEALTH_PROBE_SECONDS", 0.1)
    a = await _mower(api)
    entry = config_entry(swath.url, swath.token, await api.account_id())
    await setup_entry(hass, entry)
    coordinator = coordinator_of(hass)
    await _streamed(hass, api, a)
    opened = coordinator.stats.opened

    await hass.async_add_executor_job(swath.stop)
    await wait_for(lambda: coordinator.stats.end_reason == "shutdown", what="the end event")
    await wait_for(lambda: coordinator.stats.probes > 0, what="a /healthz probe")
    await hass.async_block_till_done()
    assert state(hass, "lawn_mower", a, "lawn_mower").state == STATE_UNAVAILABLE
    await hass.async_add_executor_job(swath.start)
    await _mower(api, mower_id=a)
    await api.post_state(a, activity="docked", battery_percent=100)

    await wait_for(
        lambda: coordinator.stats.opened > opened, timeout=10, what="the reopened stream"
    )
    await wait_for(
        lambda: state(hass, "lawn_mower", a, "lawn_mower").state == "docked",
        timeout=10,
        what="the entities back",
    )
    assert not [
        f
        for f in hass.config_entries.flow.async_progress()
        if f["context"]["source"] == SOURCE_REAUTH
    ]
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_stream_refused_for_too_many_streams_raises_a_repair(
    hass: HomeAssistant, tmp_path: object, api: SwathApi
) -> None:
    """429 (the token holds its streams already): a repair issue, gone once the stream opens."""
    swath = api.server
    swath.stop()
    swath.extra_env["SWATH_STREAMS_PER_TOKEN"] = "1"
    swath.start()
    a = await _mower(api)
    issue_id = None
    async with api.session.get(
        f"{swath.url}/v1/live/stream",
        headers={"Authorization": f"Bearer {swath.token}"},
    ) as held:
        assert held.status == 200
        entry = config_entry(swath.url, swath.token, await api.account_id())
        await setup_entry(hass, entry)
        issue_id = f"stream_refused_{entry.entry_id}"
        issues = ir.async_get(hass)
        await wait_for(
            lambda: issues.async_get_issue(DOMAIN, issue_id), what="the stream_refused issue"
        )
        assert state(hass, "lawn_mower", a, "lawn_mower").state != STATE_UNAVAILABLE
    coordinator = coordinator_of(hass)
    await wait_for(lambda: coordinator.stats.connected, what="the stream once a slot is free")
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is None
    await hass.config_entries.async_unload(entry.entry_id)
