#!/bin/bash
# param_names.sh TRANSIT_INFO SOURCE_DIR [MAN_DIR]
# Every parameter the public headers and the user documentation name must
# exist: each name of the shape <framework>_<component>_<rest> (the component
# one transit_info lists for that framework, or "base"), also when written as
# TRANSIT_MCA_<name>, is looked up in `transit_info --all --parsable`.
# Scanned: include/, docs/*.md, README.md, the component, pml, runtime and
# contrib READMEs, the man page sources in tools/man, and the built man pages
# in MAN_DIR when given.  Prints each unknown name with its file and line, and
# exits 1 if there is any.
set -u
info=$1
src=$2
man=${3:-}
[ -n "$man" ] && [ -d "$man" ] && man=$(cd "$man" && pwd)

catalog=$("$info" --all --parsable) || {
  echo "param_names: FAILED: $info --all --parsable exited non-zero"
  exit 1
}
# mca:<fw>:<component>:param:<name>:<field>:<value>
known=$(printf '%s\n' "$catalog" | grep -oP '^mca:[^:]+:[^:]+:param:\K[^:]+' | sort -u)
components=$(printf '%s\n' "$catalog" | grep -oP '^mca:\K[^:]+:[^:]+(?=:)' | sort -u | tr : _)
if [ -z "$known" ] || [ -z "$components" ]; then
  echo "param_names: FAILED: no parameters in $info --all --parsable"
  exit 1
fi

# Names written on purpose as wrong ones (an example of the error a misspelt
# parameter gets).
deliberate='btl_tcp_linkz'

files=()
while IFS= read -r f; do files+=("$f"); done < <(
  cd "$src" && find include docs tools/man README.md components pml runtime contrib \
    \( -name '*.h' -o -name '*.hpp' -o -name '*.md' -o -name '*.[1-9]' -o -name '*.h2m' \) \
    -type f 2>/dev/null | sort)
[ -n "$man" ] && [ -d "$man" ] && while IFS= read -r f; do files+=("$f"); done < <(
  find "$man" -name '*.[1-9]' -type f | sort)

# Not part of a longer identifier (transit_btl_self_component) or a file
# name (pml_ofi_shm.np3, pml_peer_failure_uct_{posix,tcp}).
pattern='(?:(?<=TRANSIT_MCA_)|(?<![A-Za-z0-9_.]))(?:btl|bml|pml|runtime|mca)_[a-z0-9_]*[a-z0-9](?![A-Za-z0-9_({]|\.[a-z0-9])'
declare -A is_param
while IFS= read -r k; do is_param[$k]=1; done <<<"$known"
# A name counts when it starts with <framework>_<component>_.
owner="^($(printf '%s\n' "$components" | paste -sd '|'))_."
bad=0
checked=0
while IFS= read -r hit; do
  # file:line:name
  name=${hit##*:}
  place=${hit%:*}
  [[ $name =~ $owner ]] || continue
  case " $deliberate " in *" $name "*) continue ;; esac
  checked=$((checked + 1))
  if [ -z "${is_param[$name]:-}" ]; then
    echo "param_names: $place: $name is not a parameter (transit_info --all)"
    bad=1
  fi
done < <(cd "$src" && grep -HnoP "$pattern" "${files[@]}")

if [ $bad = 1 ]; then
  echo "param_names: FAILED"
  exit 1
fi
echo "param_names: $checked mentions checked, all are parameters"
