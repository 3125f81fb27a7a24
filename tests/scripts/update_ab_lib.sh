# Sourced by wide-update-ab and health-update-ab, not run: the frame both compare their update
# forms in. A database made for the run and dropped at its end; a procedure `run(form, n)` the
# caller creates in it; each form's `CALL run` timed in turn, round after round, without a WAL
# flush per commit (the statement is measured, not the commit).

# Makes the database NAME next to $SWATH_TEST_DATABASE_URL's and drops it when the script exits;
# sets `url` to it.
#   update_ab_database NAME
update_ab_database() {
  local name=$1 base=${SWATH_TEST_DATABASE_URL:?set SWATH_TEST_DATABASE_URL to a PostgreSQL server}
  base=${base%%\?*}
  url=${base%/*}/$name
  UPDATE_AB_BASE=$base UPDATE_AB_NAME=$name
  trap 'psql -q "$UPDATE_AB_BASE" -c "DROP DATABASE IF EXISTS $UPDATE_AB_NAME WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
  PGOPTIONS='-c client_min_messages=warning' psql -q "$base" \
    -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name"
}

# Runs `CALL run('<form>', LOOPS)` for each form in turn, ROUNDS rounds, each after a VACUUM of
# TABLES; prints each round's milliseconds, then the medians with each form's ratio to the first.
#   update_ab_rounds ROUNDS LOOPS "TABLE…" FORM…
update_ab_rounds() {
  local rounds=$1 loops=$2 tables=$3 round form ms line
  shift 3
  local -A times
  for round in $(seq 1 "$rounds"); do
    line="round $round:"
    for form in "$@"; do
      psql -q "$url" -c "VACUUM $tables"
      ms=$(PGOPTIONS='-c synchronous_commit=off' psql -q "$url" -c '\timing on' \
        -c "CALL run('$form', $loops)" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
      times[$form]+="$ms "
      line+=" $form $ms ms"
    done
    echo "$line"
  done
  local first="" m line="medians over $rounds rounds of $loops updates:"
  for form in "$@"; do
    m=$(tr ' ' '\n' <<<"${times[$form]}" | grep . | sort -g |
      awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')
    if [[ -z $first ]]; then
      first=$m; line+=" $form $m ms"
    else
      line+=", $form $m ms ($(awk "BEGIN {printf \"%.2f\", $m / $first}")× $1)"
    fi
  done
  echo "$line"
}
