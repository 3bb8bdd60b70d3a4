# shellcheck shell=bash
# What hack/ray-up.sh and hack/ray-down.sh share; source it after setting
# STATE (the cluster's state dir).

# marked_pids : PIDs of live (non-zombie) processes using files under $STATE,
# and their descendants (a few helpers of the dashboard hold no such file).
marked_pids() {
  local roots
  roots=$({
    # find fails on processes that end while it looks: not an error here.
    find /proc/[0-9]*/fd -maxdepth 1 -lname "$STATE/*" 2>/dev/null || true
    find /proc/[0-9]*/cwd -maxdepth 0 \( -lname "$STATE" -o -lname "$STATE/*" \) 2>/dev/null || true
  } | cut -d/ -f3 | sort -un | tr '\n' ' ')
  [ -n "$roots" ] || return 0
  # Close over children (repeat until nothing is added), skip zombies and us.
  ps -eo pid=,ppid=,stat= | awk -v roots="$roots" -v self="$$" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) in_set[r[i]] = 1 }
    { pid[NR] = $1; ppid[NR] = $2; st[NR] = $3 }
    END {
      do {
        added = 0
        for (i = 1; i <= NR; i++)
          if (!(pid[i] in in_set) && (ppid[i] in in_set)) { in_set[pid[i]] = 1; added = 1 }
      } while (added)
      for (i = 1; i <= NR; i++)
        if ((pid[i] in in_set) && pid[i] != self && st[i] !~ /^Z/) print pid[i]
    }'
}
