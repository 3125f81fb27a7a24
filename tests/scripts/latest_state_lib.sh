# Sourced by bench_latest_state.sh and callgrind_latest_state.sh, not run: what both do to find
# the mower whose latest state they request.

# Prints the id of the first mower the service on $PORT lists (with the bearer $TOKEN) once it
# has a state, asking every half second, TRIES times at most. When none comes, says so with the
# service's log (LOG) and fails.
#   mower=$(first_mower_with_a_state TRIES LOG BINARY)
first_mower_with_a_state() {
    local tries=$1 log=$2 bin=$3 mower=""
    for _ in $(seq 1 "$tries"); do
        mower=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/mowers?limit=1" |
            jq -r '.items[0].id // empty' 2>/dev/null || true)
        if [ -n "$mower" ] && curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" \
            "http://127.0.0.1:$PORT/v1/mowers/$mower/state"; then
            echo "$mower"
            return 0
        fi
        sleep 0.5
    done
    echo "no mower with a state from $bin" >&2
    cat "$log" >&2
    return 1
}
