"""The architectures of the stored model suite, built from config with seeded random weights.

Developer tool only (needs torch, torchvision, timm, transformers; see generate.py): rvvkit and
its tests never import this file. Every builder returns (module, example inputs, input names,
output names); everything is tiny (few layers, narrow widths, small inputs) so that each .onnx
stays well under 1.5 MB while keeping the structure (and so the ONNX operators) of the real
architecture."""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

# The PyPI torchvision wheel's C extension links against CUDA torch; with a CPU torch it does not
# load, and torchvision's import then fails registering fake kernels for two ops it did not
# define. The models need none of its C ops: defining the two schemas lets the import finish.
_TV_LIB = torch.library.Library("torchvision", "DEF")
_TV_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_TV_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")

import torchvision.models as tvm  # noqa: E402

IMG = (1, 3, 64, 64)
SEQ = 16


def image(shape=IMG):
    return (torch.randn(*shape),), ["image"]


def tokens(vocab: int):
    """int64 input_ids and an attention_mask whose last 4 positions are padding."""
    ids = torch.randint(1, vocab, (1, SEQ), dtype=torch.int64)
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[:, -4:] = 0
    return (ids, mask), ["input_ids", "attention_mask"]


class Outputs(nn.Module):
    """Wraps a model whose forward returns a ModelOutput/dict: a plain tuple of chosen fields."""

    def __init__(self, model, fields, arg_names=None):
        super().__init__()
        self.model, self.fields, self.arg_names = model, fields, arg_names

    def forward(self, *args):
        if self.arg_names:   # by keyword: e.g. GPT-2's second positional is past_key_values
            out = self.model(**dict(zip(self.arg_names, args)))
        else:
            out = self.model(*args)
        return tuple(out[f] for f in self.fields)


# --------------------------------------------------------------------------------------------
# torchvision

def mobilenet_v3_small():
    return tvm.mobilenet_v3_small(width_mult=0.5, reduced_tail=True, num_classes=10), image()


def mobilenet_v2():
    return tvm.mobilenet_v2(width_mult=0.25, num_classes=10), image()


def efficientnet_b0():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    return EfficientNet(setting, dropout=0.0, num_classes=10, last_channel=128), image()


def regnet():
    from torchvision.models.regnet import BlockParams, RegNet
    params = BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8,
                                          se_ratio=0.25)
    return RegNet(params, num_classes=10, stem_width=16), image()


def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.0, num_classes=10), image()


def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2,
                             hidden_dim=32, mlp_dim=64, num_classes=10), image()


def swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1, 1], num_heads=[2, 2, 2],
                           window_size=[4, 4], stochastic_depth_prob=0.0,
                           num_classes=10), image()


def lraspp():
    """LR-ASPP segmentation head on a narrow MobileNetV3-small trunk (bilinear Resize out)."""
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.lraspp import LRASPP
    trunk = tvm.mobilenet_v3_small(width_mult=0.5, reduced_tail=True).features
    low, high = 1, len(trunk) - 1
    body = IntermediateLayerGetter(trunk, {str(low): "low", str(high): "high"})
    low_ch, high_ch = trunk[low].out_channels, trunk[high].out_channels
    return Outputs(LRASPP(body, low_ch, high_ch, num_classes=4, inter_channels=32),
                   ["out"]), image()


class TinyResNet(nn.Module):
    """ResNet-18's layout (stem, maxpool, 4 stages of 2 BasicBlocks, global pool, fc) at 1/8
    of its widths; torchvision's ResNet class fixes the widths at 64..512."""

    def __init__(self, widths=(8, 16, 32, 64), num_classes=10):
        super().__init__()
        from torchvision.models.resnet import BasicBlock
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            down = None if stride == 1 and cin == w else nn.Sequential(
                nn.Conv2d(cin, w, 1, stride, bias=False), nn.BatchNorm2d(w))
            layers += [BasicBlock(cin, w, stride, down), BasicBlock(w, w)]
            cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def resnet18():
    return TinyResNet(), image()


def shufflenet_v2():
    return tvm.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10), image()


# --------------------------------------------------------------------------------------------
# timm

def mobilevit():
    from timm.models.byobnet import ByobNet
    from timm.models.mobilevit import _inverted_residual_block as ir
    from timm.models.mobilevit import _mobilevit_block as mvit
    from timm.models.mobilevit import model_cfgs
    cfg = dataclasses.replace(
        model_cfgs["mobilevit_xxs"], stem_chs=8, num_features=96,
        blocks=(ir(d=1, c=8, s=1, br=2.0), ir(d=1, c=16, s=2, br=2.0),
                mvit(d=1, c=24, s=2, transformer_dim=32, transformer_depth=1, patch_size=2,
                     br=2.0),
                mvit(d=1, c=32, s=2, transformer_dim=48, transformer_depth=1, patch_size=2,
                     br=2.0)))
    return ByobNet(cfg, num_classes=10), image()


def efficientformer():
    from timm.models.efficientformer import Attention, EfficientFormer
    model = EfficientFormer(depths=(1, 1, 1, 2), embed_dims=(16, 24, 32, 48), num_vit=1,
                            num_classes=10)
    # The attention's position biases are sized for the last stage's map (7x7 at 224x224):
    # at 64x64 it is 2x2; narrower heads too.
    for mod in model.modules():
        if isinstance(getattr(mod, "token_mixer", None), Attention):
            mod.token_mixer = Attention(48, key_dim=8, num_heads=2, attn_ratio=2, resolution=2)
    return model, image()


def levit():
    from timm.models.levit import Levit
    return Levit(img_size=64, embed_dim=(32, 48, 64), key_dim=8, depth=(1, 1, 1),
                 num_heads=(2, 3, 4), num_classes=10), image()


# --------------------------------------------------------------------------------------------
# transformers (eager attention, plain MatMul/Softmax graphs, except bert_sdpa)

def _hf(cls, cfg, fields, inputs, attention="eager"):
    cfg._attn_implementation = attention
    return Outputs(cls(cfg), fields, inputs[1]), inputs


def bert(attention="eager"):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32)
    return _hf(BertModel, cfg, ["last_hidden_state", "pooler_output"], tokens(128), attention)


def bert_sdpa():
    """transformers' default attention: F.scaled_dot_product_attention, which each exporter
    writes out in its own way."""
    return bert("sdpa")


def distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    cfg = DistilBertConfig(vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                           max_position_embeddings=32)
    return _hf(DistilBertModel, cfg, ["last_hidden_state"], tokens(128))


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=32,
                     use_cache=False)
    return _hf(GPT2LMHeadModel, cfg, ["logits"], tokens(128))


def t5_encoder():
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                   relative_attention_num_buckets=8, use_cache=False)
    return _hf(T5EncoderModel, cfg, ["last_hidden_state"], tokens(128))


def whisper_encoder():
    from transformers import WhisperConfig, WhisperModel
    cfg = WhisperConfig(vocab_size=128, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                        decoder_layers=1, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16,
                        max_target_positions=16, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, decoder_start_token_id=1)
    cfg._attn_implementation = "eager"
    enc = WhisperModel(cfg).get_encoder()
    return Outputs(enc, ["last_hidden_state"]), ((torch.randn(1, 16, 32),), ["input_features"])


def wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 4, 2),
                         conv_kernel=(10, 4, 2), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                         do_stable_layer_norm=False, mask_time_prob=0.0)
    return _hf(Wav2Vec2Model, cfg, ["last_hidden_state"],
               ((torch.randn(1, 1600),), ["input_values"]))


# --------------------------------------------------------------------------------------------
# Small custom models of well-known shapes

class KeywordSpotter(nn.Module):
    """Recurrent keyword spotting on MFCC frames (1 s: 49 frames x 10 coefficients)."""

    def __init__(self, cell, hidden=32, classes=12, **kw):
        super().__init__()
        self.rnn = cell(10, hidden, batch_first=True, **kw)
        scale = 2 if kw.get("bidirectional") else 1
        self.fc = nn.Linear(hidden * scale, classes)

    def forward(self, mfcc):
        seq, _ = self.rnn(mfcc)
        return self.fc(seq[:, -1])


def lstm_kws():
    return KeywordSpotter(nn.LSTM, num_layers=2), ((torch.randn(1, 49, 10),), ["mfcc"])


def gru_kws():
    return KeywordSpotter(nn.GRU, bidirectional=True), ((torch.randn(1, 49, 10),), ["mfcc"])


def yolo():
    from yolo_lite import YoloLite
    return YoloLite(), image()


def detr():
    from detr_lite import DetrLite
    return DetrLite(), image()


ARCHS = {
    "mobilenet_v3_small": mobilenet_v3_small, "mobilenet_v2": mobilenet_v2,
    "efficientnet_b0": efficientnet_b0, "regnet": regnet, "convnext": convnext, "vit": vit,
    "swin": swin, "lraspp": lraspp, "resnet18": resnet18, "shufflenet_v2": shufflenet_v2,
    "mobilevit": mobilevit, "efficientformer": efficientformer, "levit": levit,
    "bert": bert, "bert_sdpa": bert_sdpa, "distilbert": distilbert, "gpt2": gpt2, "t5_encoder": t5_encoder,
    "whisper_encoder": whisper_encoder, "wav2vec2": wav2vec2,
    "lstm_kws": lstm_kws, "gru_kws": gru_kws, "yolo": yolo, "detr": detr,
}
