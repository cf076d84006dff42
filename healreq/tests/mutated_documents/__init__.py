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

"""The corpus of mutated stored documents, and an oracle for what healreq
does with them.

Shared by the unit robustness tests (every document through the
evaluation and the parsers) and the functional one (a sample of them in a
real deployment): ``corpus`` is the realistic instance every document
starts from, ``mutations`` the generator, ``guard`` runs a call bounded in
time and memory, and ``oracle`` evaluates a document and judges the
outcome.
"""
