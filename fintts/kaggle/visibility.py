"""Whether a dataset of yours may take what fintts uploads: absent (it is then created private), or there and private.

fintts uploads three datasets under the credentials' user: the Hugging Face token (``fintts-token``), the corpus (your
voice) and the wheels. It creates each private (``dataset_create_new(public=False)``), and later uploads add a version
with ``dataset_create_version``, which never changes who can see a dataset: only the request that creates one carries
``isPrivate`` (kaggle 2.2.5, ``KaggleApi.dataset_create_new`` sets ``ApiCreateDatasetRequest.is_private``;
``KaggleApi.dataset_create_version`` sends ``ApiCreateDatasetVersionRequestBody``, which has no such field: kagglesdk
0.1.38, ``datasets/types/dataset_api_service.py``). A dataset of that name that is public (made so on kaggle.com, or made
by something else) would publish the version fintts adds. So :func:`private_or_absent` asks Kaggle first and refuses a
public one.

Who can see a dataset is ``ApiDataset.is_private``, Kaggle's answer to ``DatasetApiService/GetDataset`` (kagglesdk
0.1.38). The ``kaggle`` client makes that call itself (``KaggleApi.dataset_status`` with
``format="json(current_version_number)"``, 2.2.5) but has no method that returns the answer whole, so it is asked through
the client's own ``build_kaggle_client()``, with its credentials and endpoint. kagglesdk reads an answer without
``isPrivate`` as ``False``, as it reads ``false`` (``KaggleObject.from_dict``; its own JSON leaves a default value out):
a dataset counts as private only when Kaggle says so.
"""

from __future__ import annotations

from typing import Any

from fintts.errors import UsageError
from fintts.kaggle.client import KaggleError, calling


class PublicDataset(UsageError):
    """A dataset fintts would add a version to is public: the message names it and says what to do."""


def private_or_absent(api: Any, ref: str, *, risk: str, instead: str) -> bool:
    """Whether ``ref`` exists (then it is private); ``False``: absent. :class:`PublicDataset` when anyone may see it.

    ``risk``: what a version fintts adds would expose, for the message; ``instead``: what to do but make it private.
    Absent is a 404, or since 2026 a 403 (kaggle-cli PR #951, #548); ``ref`` is under the credentials' own user, so a
    403 is not someone else's dataset we may not see. Any other failure is raised: taken for "absent", it would have the
    upload create a dataset that is there.
    """
    owner, slug = ref.split("/")
    try:
        dataset = calling(f"look up {ref}", lambda: _get_dataset(api, owner, slug))
    except KaggleError as err:
        if err.status in (403, 404):
            return False
        raise
    if not dataset.is_private:
        raise PublicDataset(f"{ref} is a public Kaggle dataset: {risk}. Make it private (its Settings, on "
                            f"https://www.kaggle.com/datasets/{ref}), or {instead}")
    return True


def _get_dataset(api: Any, owner: str, slug: str) -> Any:
    """Kaggle's ``ApiDataset`` of ``owner/slug`` (``requests.HTTPError`` for a refusal, as every call of the client)."""
    # kagglesdk comes with kaggle ([train]), which connect() has imported by now
    from kagglesdk.datasets.types.dataset_api_service import ApiGetDatasetRequest

    request = ApiGetDatasetRequest()
    request.owner_slug, request.dataset_slug = owner, slug
    with api.build_kaggle_client() as kaggle:
        return kaggle.datasets.dataset_api_client.get_dataset(request)
