#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""The allocation the scheduler requests, each rule, per release."""

import testtools

from healreq.objects import allocations
from healreq.objects import numa
from healreq import releases

ZED = releases.by_name('zed')
EPOXY = releases.by_name('2025.1')
FLAMINGO = releases.by_name('2025.2')
LATEST = releases.LATEST


def _flavor(vcpus=4, memory_mb=2048, root_gb=20, ephemeral_gb=0, swap=0,
            **specs):
    return {'id': 7, 'name': 'f', 'flavorid': 'f', 'vcpus': vcpus,
            'memory_mb': memory_mb, 'root_gb': root_gb,
            'ephemeral_gb': ephemeral_gb, 'swap': swap,
            'extra_specs': specs}


def _specs(**specs):
    """Extra specs whose names are no Python identifiers."""
    return {key.replace('__', ':'): value for key, value in specs.items()}


def _expected(flavor, image=None, is_bfv=False, release=LATEST):
    return allocations.expected_resources(flavor, image or {}, is_bfv,
                                          release)


class SizesTest(testtools.TestCase):

    def test_flavor_sizes(self):
        expected = _expected(_flavor(ephemeral_gb=5, swap=1536))
        # Swap rounds up to whole GiB.
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 27},
                         expected.resources)
        self.assertEqual((), expected.not_checked)

    def test_volume_backed_leaves_out_the_root_disk(self):
        expected = _expected(_flavor(ephemeral_gb=5, swap=512), is_bfv=True)
        self.assertEqual(6, expected.resources['DISK_GB'])

    def test_no_disk_at_all_asks_for_no_disk(self):
        expected = _expected(_flavor(root_gb=20), is_bfv=True)
        self.assertNotIn('DISK_GB', expected.resources)

    def test_null_sizes_count_as_zero(self):
        flavor = _flavor(root_gb=None, ephemeral_gb=None, swap=None)
        self.assertNotIn('DISK_GB', _expected(flavor).resources)


class CpuPolicyTest(testtools.TestCase):

    def test_dedicated_flavor_asks_for_pcpu(self):
        expected = _expected(_flavor(**_specs(hw__cpu_policy='dedicated')))
        self.assertEqual(4, expected.resources['PCPU'])
        self.assertNotIn('VCPU', expected.resources)

    def test_dedicated_image_asks_for_pcpu(self):
        expected = _expected(_flavor(), {'hw_cpu_policy': 'dedicated'})
        self.assertEqual({'PCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         expected.resources)

    def test_shared_flavor_with_dedicated_image_is_refused(self):
        flavor = _flavor(**_specs(hw__cpu_policy='shared'))
        error = self.assertRaises(numa.ConstraintError, _expected, flavor,
                                  {'hw_cpu_policy': 'dedicated'})
        self.assertEqual('ImageCPUPinningForbidden', error.nova_exception)

    def test_shared_policy_asks_for_vcpu(self):
        expected = _expected(_flavor(**_specs(hw__cpu_policy='shared')),
                             {'hw_cpu_policy': 'shared'})
        self.assertEqual(4, expected.resources['VCPU'])

    def test_isolated_emulator_threads_add_a_pcpu(self):
        flavor = _flavor(**_specs(hw__cpu_policy='dedicated',
                                  hw__emulator_threads_policy='isolate'))
        self.assertEqual(5, _expected(flavor).resources['PCPU'])

    def test_isolated_emulator_threads_without_pinning_add_nothing(self):
        flavor = _flavor(**_specs(hw__emulator_threads_policy='isolate'))
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         _expected(flavor).resources)

    def test_mixed_by_dedicated_mask(self):
        flavor = _flavor(**_specs(hw__cpu_policy='mixed',
                                  hw__cpu_dedicated_mask='^0'))
        resources = _expected(flavor).resources
        self.assertEqual((1, 3), (resources['VCPU'], resources['PCPU']))

    def test_mixed_with_isolated_emulator_threads(self):
        flavor = _flavor(**_specs(hw__cpu_policy='mixed',
                                  hw__cpu_dedicated_mask='0-1',
                                  hw__emulator_threads_policy='isolate'))
        resources = _expected(flavor).resources
        self.assertEqual((2, 3), (resources['VCPU'], resources['PCPU']))

    def test_mixed_by_realtime_mask_image_mask_wins(self):
        flavor = _flavor(**_specs(hw__cpu_policy='mixed',
                                  hw__cpu_realtime='yes',
                                  hw__cpu_realtime_mask='^0'))
        self.assertEqual(3, _expected(flavor).resources['PCPU'])
        resources = _expected(flavor, {'hw_cpu_realtime_mask': '0'}).resources
        self.assertEqual((3, 1), (resources['VCPU'], resources['PCPU']))

    def test_mixed_image_without_mask_pins_nothing(self):
        expected = _expected(_flavor(), {'hw_cpu_policy': 'mixed'})
        self.assertEqual(4, expected.resources['VCPU'])
        self.assertNotIn('PCPU', expected.resources)

    def test_invalid_mask_is_refused(self):
        flavor = _flavor(**_specs(hw__cpu_policy='mixed',
                                  hw__cpu_dedicated_mask='0-3'))
        error = self.assertRaises(numa.ConstraintError, _expected, flavor)
        self.assertEqual('InvalidMixedInstanceDedicatedMask',
                         error.nova_exception)


class OverridesTest(testtools.TestCase):

    def test_override_replaces_the_flavor_size(self):
        flavor = _flavor(**_specs(resources__MEMORY_MB='1024',
                                  resources__DISK_GB='3'))
        resources = _expected(flavor).resources
        self.assertEqual((1024, 3),
                         (resources['MEMORY_MB'], resources['DISK_GB']))

    def test_zero_override_removes_the_class(self):
        flavor = _flavor(**_specs(resources__VCPU='0', resources__DISK_GB='0',
                                  resources__MEMORY_MB='0'))
        self.assertEqual({}, _expected(flavor).resources)

    def test_zero_pcpu_override_removes_vcpu_too(self):
        # PCPU is named, so VCPU is not added; then PCPU=0 is stripped.
        flavor = _flavor(**_specs(resources__PCPU='0'))
        self.assertEqual({'MEMORY_MB': 2048, 'DISK_GB': 20},
                         _expected(flavor).resources)

    def test_granular_groups_add_up(self):
        flavor = _flavor(**_specs(resources1__VCPU='2', resources2__VCPU='2',
                                  resources_G__MEMORY_MB='512'))
        resources = _expected(flavor).resources
        self.assertEqual((4, 512), (resources['VCPU'], resources['MEMORY_MB']))

    def test_invalid_overrides_are_ignored(self):
        flavor = _flavor(**_specs(resources__VCPU='x', resources__DISK_GB='-1',
                                  resources__BOGUS='2', resources__vcpu='8'))
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         _expected(flavor).resources)
        self.assertEqual((), _expected(flavor).not_checked)

    def test_custom_and_other_standard_classes_are_not_checked(self):
        flavor = _flavor(**_specs(resources__CUSTOM_GOLD='1',
                                  resources1__VGPU='1',
                                  resources__SRIOV_NET_VF='2',
                                  resources__CUSTOM_ZERO='0'))
        expected = _expected(flavor)
        self.assertEqual(('CUSTOM_GOLD', 'SRIOV_NET_VF', 'VGPU'),
                         expected.not_checked)
        self.assertEqual({'VCPU', 'MEMORY_MB', 'DISK_GB'},
                         set(expected.resources))

    def test_traits_are_not_resources(self):
        flavor = _flavor(**_specs(trait__CUSTOM_FAST='required',
                                  trait1__HW_CPU_HYPERTHREADING='forbidden'))
        expected = _expected(flavor, {'traits_required': ['CUSTOM_X']})
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         expected.resources)
        self.assertEqual((), expected.not_checked)

    def test_ironic_style_flavor(self):
        flavor = _flavor(**_specs(resources__VCPU='0',
                                  resources__MEMORY_MB='0',
                                  resources__DISK_GB='0',
                                  resources__CUSTOM_BAREMETAL_GOLD='1'))
        expected = _expected(flavor)
        self.assertEqual({}, expected.resources)
        self.assertEqual(('CUSTOM_BAREMETAL_GOLD',), expected.not_checked)


class MemoryEncryptionTest(testtools.TestCase):

    UEFI = {'hw_firmware_type': 'uefi'}

    def test_on_the_compute_node_before_2025_2(self):
        flavor = _flavor(**_specs(hw__mem_encryption='true'))
        for release in (ZED, EPOXY):
            expected = _expected(flavor, self.UEFI, release=release)
            self.assertEqual(1, expected.resources['MEM_ENCRYPTION_CONTEXT'])
            self.assertEqual((), expected.not_checked)

    def test_not_checked_from_2025_2(self):
        flavor = _flavor(**_specs(hw__mem_encryption='true'))
        for release in (FLAMINGO, LATEST):
            expected = _expected(flavor, self.UEFI, release=release)
            self.assertNotIn('MEM_ENCRYPTION_CONTEXT', expected.resources)
            self.assertEqual(('MEM_ENCRYPTION_CONTEXT',),
                             expected.not_checked)

    def test_requested_by_the_image(self):
        image = dict(self.UEFI, hw_mem_encryption=True)
        expected = _expected(_flavor(), image, release=ZED)
        self.assertEqual(1, expected.resources['MEM_ENCRYPTION_CONTEXT'])

    def test_conflict_is_refused(self):
        flavor = _flavor(**_specs(hw__mem_encryption='no'))
        image = dict(self.UEFI, hw_mem_encryption=True)
        for release in (ZED, LATEST):
            error = self.assertRaises(numa.ConstraintError, _expected,
                                      flavor, image, release=release)
            self.assertEqual('FlavorImageConflict', error.nova_exception)

    def test_needs_uefi(self):
        flavor = _flavor(**_specs(hw__mem_encryption='true'))
        error = self.assertRaises(numa.ConstraintError, _expected, flavor,
                                  release=ZED)
        self.assertEqual('FlavorImageConflict', error.nova_exception)

    def test_models_per_release(self):
        flavor = _flavor(**_specs(hw__mem_encryption='true',
                                  hw__mem_encryption_model='amd-sev-snp'))
        # Before 2025.2 the model is not read; 2025.2 does not know this
        # one; 2026.2 requires stateless firmware for it.
        self.assertEqual(1, _expected(flavor, self.UEFI, release=EPOXY)
                         .resources['MEM_ENCRYPTION_CONTEXT'])
        for release, refusal in ((FLAMINGO, 'Invalid'),
                                 (LATEST, 'StatelessFirmwareRequired')):
            error = self.assertRaises(numa.ConstraintError, _expected,
                                      flavor, self.UEFI, release=release)
            self.assertEqual(refusal, error.nova_exception)
        image = dict(self.UEFI, hw_firmware_stateless=True)
        self.assertEqual(('MEM_ENCRYPTION_CONTEXT',),
                         _expected(flavor, image).not_checked)


class NotDerivedTest(testtools.TestCase):

    def test_pci_alias_from_2023_1(self):
        flavor = _flavor(**_specs(pci_passthrough__alias='a1:2'))
        self.assertEqual(('PCI in Placement',), _expected(flavor).not_checked)
        # Zed's scheduler never allocates PCI devices in Placement.
        self.assertEqual((), _expected(flavor, release=ZED).not_checked)

    def test_accelerators(self):
        flavor = _flavor(**_specs(accel__device_profile='dp1'))
        self.assertEqual(('accelerators',), _expected(flavor).not_checked)

    def test_persistent_memory(self):
        flavor = _flavor(**_specs(hw__pmem='4GB,4GB, small-1'))
        expected = _expected(flavor)
        self.assertEqual(('CUSTOM_PMEM_NAMESPACE_4GB',
                          'CUSTOM_PMEM_NAMESPACE_SMALL_1'),
                         expected.not_checked)
        self.assertEqual({'CUSTOM_PMEM_NAMESPACE_4GB': 2,
                          'CUSTOM_PMEM_NAMESPACE_SMALL_1': 1},
                         {rc: amount for rc, amount in
                          allocations.requested_resources(
                              flavor, {}, False, LATEST).items()
                          if rc.startswith('CUSTOM_')})

    def test_pci_numa_policy_is_a_trait_but_validated(self):
        flavor = _flavor(**_specs(hw__pci_numa_affinity_policy='socket'))
        self.assertEqual((), _expected(flavor).not_checked)
        error = self.assertRaises(
            numa.ConstraintError, _expected, flavor,
            {'hw_pci_numa_affinity_policy': 'required'})
        self.assertEqual('ImagePCINUMAPolicyForbidden', error.nova_exception)


class HealAllocationsTest(testtools.TestCase):

    def test_ignores_the_image_cpu_policy(self):
        healed = allocations.heal_allocations_resources(_flavor(), False,
                                                        LATEST)
        self.assertEqual({'VCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         healed)
        self.assertEqual(
            4, _expected(_flavor(), {'hw_cpu_policy': 'dedicated'})
            .resources['PCPU'])

    def test_counts_the_flavor_policy_and_every_class(self):
        flavor = _flavor(**_specs(hw__cpu_policy='dedicated',
                                  resources__CUSTOM_GOLD='1'))
        self.assertEqual(
            {'PCPU': 4, 'MEMORY_MB': 2048, 'DISK_GB': 20, 'CUSTOM_GOLD': 1},
            allocations.heal_allocations_resources(flavor, False, LATEST))

    def test_volume_backed(self):
        self.assertNotIn('DISK_GB', allocations.heal_allocations_resources(
            _flavor(), True, LATEST))

    def test_refusals(self):
        refusal = allocations.heal_allocations_refusal
        self.assertIsNone(refusal(_flavor(), False, LATEST))
        for specs in (_specs(resources__VGPU='0'),
                      _specs(accel__device_profile='dp1'),
                      _specs(hw__mem_encryption='true')):
            self.assertIn('heal_allocations',
                          refusal(_flavor(**specs), False, LATEST))
        # A granular vGPU group is not refused by its check.
        self.assertIsNone(refusal(_flavor(**_specs(resources1__VGPU='1')),
                                  False, LATEST))
