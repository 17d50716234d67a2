"""visformer: watch a Transformer translate, layer by layer and head by head."""

import streamlit as st

st.set_page_config(page_title="visformer", page_icon="🔭", layout="wide")
st.title("visformer")
st.write("The app is being built.")
