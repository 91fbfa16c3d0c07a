#!/usr/bin/env python3
"""Write an hwloc v2 XML topology of an 8x AMD Instinct MI300X node.

The node is shaped like a real 8-OAM MI300X server (Dell XE9680, Supermicro
AS-8125GS): two AMD EPYC 9654-like packages (96 cores, 2 threads per core,
12 CCDs with a 32 MiB L3 each: 384 PUs in all), 768 GiB of memory per
package, and 8 GPUs, 4 per package. Rail i is one PCIe switch holding GPU i
and NIC i.

    --nps 1   one NUMA node per package (2 in all). The 4 host bridges of a
              package hang under the Package.
    --nps 4   four NUMA nodes per package (8 in all, 24 cores and 192 GiB
              each). Each quarter of a package is a Group (as hwloc makes one
              on a real NPS4 EPYC to hold the NUMA node); that quarter's host
              bridge hangs under it, so the GPU's first non-I/O ancestor has
              exactly that NUMA node's cpuset.

How it is made: hwloc's synthetic topology (lstopo-no-graphics --input
"<description>" --of xml -) gives the CPU and memory side; this script then
adds the I/O tree with xml.etree, and finally loads the result back with
lstopo-no-graphics --whole-io --of xml so that the file is written by hwloc
itself (hwloc 2.9: topology version="2.0").

Per rail i (i = 0..7, B = 0x20 * i):

    Bridge   host bridge 0-1, bridge_pci 0000:[B+4 - B+6]
      Bridge   PCIe switch 1-1 at 0000:(B+4):00.0, bridge_pci [B+5 - B+6]
               (Broadcom PEX890xx [1000:c030])
        PCIDev   0000:(B+5):00.0  AMD Instinct MI300X  [1002:74a1] class 0380
          OSDev    renderD(128+i)  osdev_type 1 (GPU), Linux DRM backend
          OSDev    rsmi<i>         osdev_type 1 (GPU), subtype RSMI
        PCIDev   0000:(B+6):00.0  ConnectX-7 400G [15b3:1021] class 0207
          OSDev    mlx5_<i>        osdev_type 3 (OpenFabrics)

GPU buses are 05, 25, 45, 65 (package 0) and 85, a5, c5, e5 (package 1).

Choices (see tests/data/hwloc/README.md):
  * PCI class 0380 ("Display controller", what amdgpu reports for MI300X);
    some tools list it as 1200 (Processing accelerators).
  * rsmi<i> carries the infos hwloc's RSMI backend (topology-rsmi.c) writes:
    Backend=RSMI, GPUVendor=AMD, GPUModel, AMDSerial, AMDUUID (rsmi unique
    id, printed %llx), XGMIHiveID, RSMIVRAMSize/RSMIVisibleVRAMSize (KiB,
    bare number as in hwloc 2.x), XGMIPeers (all 7 other GPUs, with hwloc's
    trailing space). Serials, UUIDs and the hive id are made up. No XGMI
    distance matrices are written.
  * renderD<128+i>: hwloc's Linux backend adds DRM devices with osdev_type
    GPU, no subtype and no infos (and only with --whole-io / KEEP_ALL; it
    would also add card<N>, left out here). Backend=Linux is added anyway,
    as on mlx5_<i> here and in dgx-h100-like.xml, so that a test can tell
    the two GPU OS devices apart by info as well as by name.
  * Each rail has its own host bridge (an EPYC root complex per quadrant).

Standard library only. Usage:
    tools/hwloc/make_mi300x_xml.py --nps 1 tests/data/hwloc/mi300x-nps1.xml
    tools/hwloc/make_mi300x_xml.py --nps 4 tests/data/hwloc/mi300x-nps4.xml
"""

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

LSTOPO = "lstopo-no-graphics"

GIB = 1 << 30
PACKAGE_MEMORY = 768 * GIB

SYNTHETIC = {
    1: "pack:2 [numa(memory=%d)] l3:12(size=32MiB) core:8 pu:2" % PACKAGE_MEMORY,
    4: "pack:2 group:4 [numa(memory=%d)] l3:3(size=32MiB) core:8 pu:2"
       % (PACKAGE_MEMORY // 4),
}

GPUS = 8
CPU_VENDOR = "AuthenticAMD"
CPU_MODEL = "AMD EPYC 9654 96-Core Processor"
GPU_MODEL = "AMD Instinct MI300X"
GPU_PCI_TYPE = "0380 [1002:74a1] [1002:74a1] 00"
NIC_PCI_TYPE = "0207 [15b3:1021] [15b3:0041] 00"
SWITCH_PCI_TYPE = "0604 [1000:c030] [1000:a064] 00"
# PCIe Gen5 x16 as hwloc computes it: 32 GT/s * 128/130 * 16 lanes / 8.
LINK_SPEED = "%f" % (32 * 128 / 130 * 16 / 8)
VRAM_KIB = 192 * GIB // 1024
XGMI_HIVE_ID = "9e3c5b1a7d04f862"


def run_lstopo(args, **kw):
    try:
        return subprocess.run([LSTOPO] + args, check=True,
                              stdout=subprocess.PIPE, text=True, **kw).stdout
    except FileNotFoundError:
        sys.exit("%s not found (install the hwloc package)" % LSTOPO)


def info(parent, name, value):
    ET.SubElement(parent, "info", name=name, value=value)


class GpIndex:
    def __init__(self, root):
        self.next = 1 + max(int(e.get("gp_index", "0")) for e in root.iter("object"))

    def __call__(self):
        value = self.next
        self.next += 1
        return str(value)


def add_rail(parent, rail, gp):
    """Append host bridge + PCIe switch + GPU + NIC of rail `rail` under parent."""
    base = 0x20 * rail
    switch_bus, gpu_bus, nic_bus = base + 4, base + 5, base + 6

    host = ET.SubElement(parent, "object", type="Bridge", gp_index=gp(),
                         bridge_type="0-1", depth="0",
                         bridge_pci="0000:[%02x-%02x]" % (switch_bus, nic_bus))
    switch = ET.SubElement(host, "object", type="Bridge", gp_index=gp(),
                           bridge_type="1-1", depth="1",
                           bridge_pci="0000:[%02x-%02x]" % (gpu_bus, nic_bus),
                           pci_busid="0000:%02x:00.0" % switch_bus,
                           pci_type=SWITCH_PCI_TYPE, pci_link_speed=LINK_SPEED)

    gpu = ET.SubElement(switch, "object", type="PCIDev", gp_index=gp(),
                        pci_busid="0000:%02x:00.0" % gpu_bus,
                        pci_type=GPU_PCI_TYPE, pci_link_speed=LINK_SPEED)
    drm = ET.SubElement(gpu, "object", type="OSDev", gp_index=gp(),
                        name="renderD%d" % (128 + rail), osdev_type="1")
    info(drm, "Backend", "Linux")
    rsmi = ET.SubElement(gpu, "object", type="OSDev", gp_index=gp(),
                         name="rsmi%d" % rail, subtype="RSMI", osdev_type="1")
    info(rsmi, "Backend", "RSMI")
    info(rsmi, "GPUVendor", "AMD")
    info(rsmi, "GPUModel", GPU_MODEL)
    info(rsmi, "AMDSerial", "6923%08d" % (417000 + rail))
    info(rsmi, "AMDUUID", "%x" % (0x5fa1c0de3a7b0000 + 0x1111 * rail))
    info(rsmi, "XGMIHiveID", XGMI_HIVE_ID)
    info(rsmi, "RSMIVRAMSize", str(VRAM_KIB))
    info(rsmi, "RSMIVisibleVRAMSize", str(VRAM_KIB))
    info(rsmi, "XGMIPeers",
         "".join("rsmi%d " % peer for peer in range(GPUS) if peer != rail))

    nic = ET.SubElement(switch, "object", type="PCIDev", gp_index=gp(),
                        pci_busid="0000:%02x:00.0" % nic_bus,
                        pci_type=NIC_PCI_TYPE, pci_link_speed=LINK_SPEED)
    ib = ET.SubElement(nic, "object", type="OSDev", gp_index=gp(),
                       name="mlx5_%d" % rail, subtype="OpenFabrics", osdev_type="3")
    info(ib, "Backend", "Linux")
    guid = "a088:c203:00%02x:%04x" % (0x10 + rail, 0x1e40 + rail)
    info(ib, "NodeGUID", guid)
    info(ib, "SysImageGUID", guid)
    info(ib, "Port1State", "4")


def build(nps):
    description = SYNTHETIC[nps]
    root = ET.fromstring(run_lstopo(["--input", description, "--of", "xml", "-"]))
    machine = root.find("object")
    for element in machine.findall("info"):
        if element.get("name") == "SyntheticDescription":
            element.set("value", "MI300X-NPS%d-like: %s + 8 GPUs + 8 NICs"
                        % (nps, description))

    packages = machine.findall("object[@type='Package']")
    assert len(packages) == 2
    for package in packages:
        # hwloc writes infos before child objects.
        package.insert(0, ET.Element("info", name="CPUModel", value=CPU_MODEL))
        package.insert(0, ET.Element("info", name="CPUVendor", value=CPU_VENDOR))

    if nps == 1:
        parents = [p for p in packages for _ in range(GPUS // 2)]
    else:
        parents = [g for p in packages for g in p.findall("object[@type='Group']")]
    assert len(parents) == GPUS

    gp = GpIndex(root)
    for rail, parent in enumerate(parents):
        add_rail(parent, rail, gp)
    return ET.tostring(root, encoding="unicode")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nps", type=int, choices=(1, 4), required=True)
    parser.add_argument("output", help="XML file to write")
    args = parser.parse_args()

    raw = build(args.nps)
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as tmp:
        tmp.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        tmp.write('<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        tmp.write(raw)
    try:
        # Let hwloc check and write the final file. --whole-io keeps the DRM
        # OS devices; the XML's own infos are kept as they are.
        text = run_lstopo(["--input", tmp.name, "--whole-io", "--of", "xml", "-"],
                          env=dict(os.environ, HWLOC_XML_VERBOSE="1"))
    finally:
        os.unlink(tmp.name)
    with open(args.output, "w") as out:
        out.write(text)


if __name__ == "__main__":
    main()
