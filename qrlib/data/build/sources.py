"""Where every offline data set comes from: public GitHub files at pinned commits.

One table, :data:`SOURCES`: for each set, its pieces (repository, commit, path in the
repository, sha256 of the file), its license and citation. The facts are those of each
set's ``PROVENANCE.md``; :mod:`qrlib.data.build.fetch` downloads each piece from
``<base>/<repo>/<commit>/<path>`` (``raw.githubusercontent.com`` by default), checks its
sha256, and hands the files to the set's builder.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Piece", "DataSet", "SOURCES", "RAW_BASE"]

RAW_BASE = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class Piece:
    """One source file: ``repo`` (owner/name) at ``commit``, ``path`` in it, its sha256."""

    repo: str
    commit: str
    path: str
    sha256: str

    def url(self, base: str = RAW_BASE) -> str:
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"

    def local(self) -> str:
        """Its path under a folder laid out as the raw URLs (``repo/commit/path``)."""
        return f"{self.repo}/{self.commit}/{self.path}"


@dataclass(frozen=True)
class DataSet:
    name: str
    pieces: tuple[Piece, ...]
    license: str
    citation: str
    builder: str | None  # module of qrlib.data.build that converts it (None: none yet)


_SPIDER_DBS = {
    "battle_death": "12569f4493a9655639c4ea86ba4bd8a4ea6411e1b8ae0e1fdf3d6a995344265d",
    "car_1": "9d851e396e02997a1de073ae982fe1e4b1769fdffce2fac6e325857a3a938709",
    "concert_singer": "4fa1ba5ab4577e895271088b1dc44aa94be88e25a54293317a67584112ef059d",
    "course_teach": "da45fcdde64ac2b9330146506b7653ad4417489d8e496e509045e1b02245d793",
    "cre_Doc_Template_Mgt": "9c3fdd03d8795ecde60aae782ce50c4fb1d6c03de1401fcdd6dc177342a53df5",
    "dog_kennels": "ea5fbc6cf6aaf500371c5c121c339d9802ba6f5fbecd948a5274c0b487a9f486",
    "employee_hire_evaluation":
        "760fec5cc872ef0cdf99242614f05c93dbd00d422ac9da87ea64fcf555be7373",
    "flight_2": "db777ba6488ae2b515cb138d71ff23c4533e5fd0355854648a1102faff3fb7af",
    "museum_visit": "3217aee38d8e3661d374bf025591b7164a1179c568ef5d20f3c338035fc6e1dd",
    "network_1": "bec92cd9a68d6f23469a0df246429299f44caaf75eab12275784e0bb7d0aa9ca",
    "orchestra": "13b64af1cf6fcbd34953a44f951b2bf79bedc000b344549212dac1a9345e2f86",
    "pets_1": "8ffe0ea9b3b034ca8860a2f18300a98c7583ce2522ea195726a04803f675e5bb",
    "poker_player": "63fffd7b68524f07a742a74b74b95a4ba178e6419f3574b9ee78b8dda1df46ba",
    "real_estate_properties":
        "5d0bd83afa93a843e68f892d8430fe625d7ed2508aae00a341926b0b5b478a29",
    "singer": "5c1b72755d148c294b26d7b479307e8799b93485ac918720f953e2ab84d59a0a",
    "student_transcripts_tracking":
        "5a1f4928a1fd36f6edb31c4f054203b2e2fab6b18e5951c4f5633628f82a8e56",
    "tvshow": "1212c2e75cf1dcf3aeb4055331a85298b073d8a613ead77975b13bd3346b9fc4",
    "voter_1": "815bf1611b8a32f649d292a6138562f1761a0c10cb256e20f6561199cff31531",
    "world_1": "17b986695f16786d58d66f85e49dba87bdfe72953207ab9b1b49da9d2301ef65",
}
_SQL_MIND = ("wz1498090183/sql-mind-agent", "1c59a1ecb3a6ce9b39498f296ccdcc9c9b3ef81b")
_TEXT2SQL = ("hyukkyukang/text2SQL", "999f5e467a3c2a263533f1dfa3d0106a18d343d1")
_IR = ("moorateeahtashil/Information-Retrieval", "00b74e83a48f52e6588946861a3bd6cfe9f7fede")
_IRCOT = Piece("xindili-cmu/anlp-project-multihop", "df0d5757f42f098ab6026f40323e91c369307506",
               "processed_data/hotpotqa/dev_subsampled.jsonl",
               "837a919903fedf521211c4271f168ad5458488198e9c4d967bf5f3a579525ce8")
_HF_SUBSET = Piece("nakulbh/Meve-framework", "a83b659f7790e00217073720506d453bec192a35",
                   "data/hotpot_dev_distractor_v1.json",
                   "32ed3ffab548f1d57ba65365bd581d17b428980fa7be881ab0c45f79d9fe6827")

SOURCES: dict[str, DataSet] = {s.name: s for s in (
    DataSet("scifact", (
        Piece("sumithra-p-v/claimverifier", "b42f1c3444b28884ddcfadffafbfe223646c6c37",
              "data/scifact.zip",
              "a798a7046af0f6fa04476448459ce7cafeea5bd90d4d99c53a0e27dc5e1a4673"),
        Piece("rluch069/Vector-Space-Model-Based-Information-Retrieval-System-for-the-SciFact-"
              "Dataset", "fa9ce89185846d8b19fab95334bd6c58f60ee38f", "scifact/queries.jsonl",
              "8ff84a7c903f722981cd8d595c022660140c51867b27608a6d4910db86080313"),
        Piece(*_IR, "scifact/qrels/train.tsv",
              "a53f2114831916c096b6c37d9e54da68cef4efdcdbd5ed46533601af972acf1d"),
        Piece(*_IR, "scifact/qrels/test.tsv",
              "0864bb985e0ca2367ba217977e72004d549054b2b06666ed9d4825ac7c21284c")),
        license="CC BY-NC 2.0 (SciFact; abstracts from S2ORC), non-commercial research use",
        citation="Wadden et al., Fact or Fiction: Verifying Scientific Claims, EMNLP 2020; "
                 "BEIR: Thakur et al., NeurIPS 2021 Datasets and Benchmarks",
        builder="scifact"),
    DataSet("nfcorpus", (
        Piece("KID-22/Cocktail", "d070bccd55e643c8c9d018ef65e5825099e97550",
              "dataset/nfcorpus.zip",
              "4af0c2c3c8e52b603a8173f2e01da92342fdf6b74432b5a3d798d74534f02ad5"),),
        license="free for academic use (NutritionFacts.org content; see the original README)",
        citation="Boteva et al., A Full-Text Learning to Rank Dataset for Medical Information "
                 "Retrieval, ECIR 2016; BEIR: Thakur et al., NeurIPS 2021",
        builder="nfcorpus"),
    DataSet("spider-dev", (
        Piece(*_SQL_MIND, "spider_data/dev.json",
              "30d64a3fccde493226df79687aed9e4a1c0129525baf44f29c0573d914d758a4"),
        Piece(*_SQL_MIND, "spider_data/tables.json",
              "61bb20aa401f03164e2d7f3b16509b7b5f79cc9c943ca7bd159046df1159e2ed"),
        Piece(*_SQL_MIND, "spider_data/dev_gold.sql",
              "0b14e99791ebc59741608e68d1d73a6dbb75556c435faa3f4dce816b90c96661"),
        *(Piece(*_TEXT2SQL, f"datasets/spider/database/{db}/{db}.sqlite", h)
          for db, h in _SPIDER_DBS.items())),
        license="CC BY-SA 4.0",
        citation="Yu et al., Spider: A Large-Scale Human-Labeled Dataset for Complex and "
                 "Cross-Domain Semantic Parsing and Text-to-SQL Task, EMNLP 2018",
        builder="spider"),
    DataSet("hotpotqa-mini", (_IRCOT, _HF_SUBSET),
        license="CC BY-SA 4.0 (Wikipedia text)",
        citation="Yang et al., HotpotQA, EMNLP 2018; subsample of IRCoT (Trivedi et al., "
                 "ACL 2023)",
        builder="hotpotqa"),
    DataSet("hotpotqa-large", (
        _IRCOT,
        _HF_SUBSET,
        Piece("JianGuanTHU/AMOR", "f950e63dd4ad5ab50f85864aefb25a08fe5c71af",
              "data/hotpotqa/test.json",
              "d2d566c667d789508aa3511d89cfcc3480fc9d62e556a09331be9376be42c075"),
        Piece("JianGuanTHU/AMOR", "f950e63dd4ad5ab50f85864aefb25a08fe5c71af",
              "data/hotpotqa/dev.json",
              "96296f21ea67a6e7b18017f657f7c1181e3aebdbd337993500f3280a1c4d7c28"),
        Piece("saptarshi059/TTS-project", "1322e0245882eeb3eb8d8e205ab8538bea735878",
              "sampled_data/hotpotqa/sampled_ds.json",
              "d3b9205c44a4f62380b58f5c5df5b1b7dae29b96f343d2ee724714a04340bdda"),
        Piece("OSU-NLP-Group/HippoRAG", "b144c46df14cabe5f5822d8caded4bec5f709461",
              "data/hotpotqa_train.json",
              "6c0e2689d03c94b3bb4d5f94ed806ea4f4eb4f46c12132f8e91df774ad5c5a22")),
        license="CC BY-SA 4.0 (Wikipedia text)",
        citation="Yang et al., HotpotQA, EMNLP 2018; sources: IRCoT, AMOR, HippoRAG",
        builder="hotpotqa_large"),
    DataSet("2wikimultihopqa-mini", (
        Piece("OSU-NLP-Group/HippoRAG", "b144c46df14cabe5f5822d8caded4bec5f709461",
              "data/2wikimultihopqa_corpus.json",
              "9d6e352952aafb18dab22bf8195039461321a44a949df902ae83bce134ad238a"),
        Piece("saptarshi059/TTS-project", "ab1545d5d78215e89d4f16dd1c86b5d3628fda9f",
              "data/2wikimultihopqa/test.json",
              "33e53ad0299d00577fa617be9fcf2166a909dacf65f0d61799d09ef9935dff7c"),
        Piece("saptarshi059/TTS-project", "1322e0245882eeb3eb8d8e205ab8538bea735878",
              "sampled_data/2wikimultihopqa/sampled_ds.json",
              "a0c7d02703db7efbd9f8d55b99e11d06d77aa777ef0934fc476b8a7533ec9922")),
        license="Apache-2.0 (2WikiMultihopQA release); paragraph text CC BY-SA (Wikipedia)",
        citation="Ho et al., Constructing A Multi-hop QA Dataset for Comprehensive Evaluation "
                 "of Reasoning Steps, COLING 2020; sources: HippoRAG, GFM-RAG",
        builder="twowiki"),
)}
