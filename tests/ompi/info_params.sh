#!/usr/bin/env bash
# ompi_info loads the adapter from our directory and lists its parameters.
#   info_params.sh <adapter dir>
set -euo pipefail
adapter_dir=$1
default_path=$(ompi_info --parsable --level 9 --param mca base 2>/dev/null |
  sed -n 's/^mca:mca:base:param:mca_base_component_path:value://p' | tr -d '"')
export OMPI_MCA_mca_base_component_path="$adapter_dir${default_path:+:$default_path}"
out=$(ompi_info --param btl transit --level 9 --parsable)
status=0
for p in btl_transit_include btl_transit_verbose btl_transit_descriptors btl_transit_dynamic; do
  if ! grep -q "^mca:btl:transit:param:$p:value:" <<<"$out"; then
    echo "ompi_info does not list $p" >&2
    status=1
  fi
done
if ! grep -q "^mca:btl:transit:version:" <<<"$out" &&
   ! grep -q "^mca:btl:transit:version" <<<"$(ompi_info --parsable)"; then
  echo "ompi_info does not list the transit component" >&2
  status=1
fi
[ $status -eq 0 ] && echo "ompi_info lists the adapter and its parameters"
exit $status
