"""The batch the speed benchmarks time: rattled copies of one molecule built from SMILES with RDKit (hydrogens added,
embedded with `randomSeed=0`), as the tensors a backbone takes. Shared by bench_equiformer.py and
bench_equiformer_v2.py (run from the repository root: `python benchmarks/<script>.py`)."""
import numpy as np
import torch

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def molecule_batch(smiles: str = ASPIRIN, copies: int = 8, rattle: float = 0.05, seed: int = 0):
    "(z [B*N] long, pos [B*N, 3] float32 in A, batch [B*N]) of `copies` copies of one conformer, each rattled by `rattle` A."
    from rdkit import Chem
    from rdkit.Chem import AllChem
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    if AllChem.EmbedMolecule(mol, randomSeed=0) != 0: raise RuntimeError(f"RDKit could not embed {smiles}")
    p0, z0 = mol.GetConformer().GetPositions(), [a.GetAtomicNum() for a in mol.GetAtoms()]
    rng = np.random.default_rng(seed)
    pos = np.concatenate([p0 + rattle * rng.standard_normal(p0.shape) for _ in range(copies)])
    return torch.tensor(z0 * copies), torch.tensor(pos, dtype=torch.float32), torch.arange(copies).repeat_interleave(len(z0))
